"""What crosses the workflow boundary about people's decisions: the gate's activity
inputs, the decision signals and updates with their answers, standing grants, signed
tokens to check, pending approvals and escalations. Kept lean: history keeps them."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from durable_agent._spec._approval_policy import ApprovalSettings, ArgumentTest, describe_arguments
from durable_agent._wire._contract import Contract


class ApprovalCheckInput(Contract):
    calls: list[tuple[str, str]]
    """(tool name, raw arguments) of the calls a predicate must judge."""
    predicates: list[str | None] | None = None
    """For each call, the named predicate (``@approval_predicate``) of a rule to ask, or
    ``None`` for the tool's own (unset: the tool's own for every call)."""


class DescribeCallsInput(Contract):
    calls: list[tuple[str, str]]
    """(tool name, raw arguments) of calls waiting for a person, whose tool describes
    its calls (``@tool(describe=...)``)."""


class EscalationNotice(Contract):
    """Tell a second group that calls wait for them (``approvals.escalation``)."""

    notifier: str | None = None
    """The ``@escalation_notifier`` to call (``None``: the escalation is only logged)."""
    notify: list[str]
    approvals: list[PendingApproval]
    session_id: str = ""
    """Filled in by the activity (the workflow asking)."""


DecisionKind = Literal["approve", "deny", "respond"]


class ApprovalSignal(Contract):
    """A person's decision on one pending call (signals ``approve``, ``deny`` and
    ``respond``; the ``decide`` update adds ``decision``)."""

    approval_id: str
    by: str | None = None
    reason: str | None = None
    """Why (for a denial: what the model reads)."""
    arguments: dict[str, Any] | None = None
    """Approve with these arguments instead of the model's (validated against the tool's
    schema before anything runs; the originals are kept on the approval record)."""
    always: Literal["tool", "matching"] | None = None
    """Approve this call and, for the rest of the session, every call of its tool
    (``tool``) or those whose arguments pass ``matching`` (until revoked)."""
    matching: list[ArgumentTest] = Field(default_factory=list)
    content: str | None = None
    """``respond``: the tool's result, given by a person (the tool does not run)."""
    is_error: bool = False
    """``respond``: give ``content`` as an error result."""
    token: str | None = None
    """A signed token proving who decides (``durable_agent._contracts._approver_tokens``)."""


class DecisionRequest(ApprovalSignal):
    """The ``decide`` update: a decision the caller learns the fate of at once."""

    decision: DecisionKind

    def as_signal(self) -> ApprovalSignal:
        """The same decision as the signal of its kind carries it."""
        return ApprovalSignal.model_validate(self.model_dump(exclude={"decision"}))


class DecisionResult(Contract):
    approval_id: str
    """The call decided (a grant's id, for a revocation)."""
    decision: DecisionKind | Literal["revoke"]
    by: str | None = None
    verified: bool = False
    """``by`` was proved by a signed token."""
    grant_id: str | None = None
    """The grant an ``always`` decision made."""


class Grant(Contract):
    """An "always" decision: later calls of ``tool`` (passing ``matching``) are approved
    without asking, for the rest of the session, until revoked."""

    grant_id: str
    tool: str
    matching: list[ArgumentTest] = Field(default_factory=list)
    by: str | None = None
    verified: bool = False
    at: datetime
    approval_id: str
    """The decision that made it."""


class ApprovalPolicyView(Contract):
    """The ``approval_policy`` query: how the session's gate decides."""

    settings: ApprovalSettings
    tool_approvers: dict[str, list[str]] = Field(default_factory=dict)
    grants: list[Grant] = Field(default_factory=list)


class RevokeGrantSignal(Contract):
    grant_id: str
    by: str | None = None
    reason: str | None = None
    token: str | None = None


class TokenCheck(Contract):
    """One signed decision for the workers to verify (with keys only they hold); the
    session it must be for is the workflow asking."""

    token: str
    subject: str
    """The approval id (or grant id) the token must be for."""
    action: str
    """``approve``, ``deny``, ``respond`` or ``revoke``."""
    digest: str | None = None
    """What the token must sign: the whole decision and its call (``decision_digest``)."""


class TokenVerdict(Contract):
    approver: str | None = None
    """Who signed, when the token is good."""
    error: str | None = None


class PendingApproval(Contract):
    approval_id: str
    turn: int
    slot: int
    tool_name: str
    arguments: str
    requested_at: datetime
    deadline: datetime | None = None
    described_arguments: str | None = None
    """The call in a few readable words (the tool's ``describe``, or a default form)."""
    approvers: list[str] | None = None
    """Who may decide it (unset: anyone the session's policy accepts)."""
    rule: str | None = None
    """The spec's rule that asked for a person (unset: the tool's own policy)."""
    escalated_to: list[str] | None = None
    """Its deadline passed once: extended, and these names were asked too."""
    signed_only: bool | None = None
    """The worker's owner names who decides the tool's calls: only their signed
    decisions count, and an escalation asks no one else to decide."""
    awaits_output: bool | None = None
    """The call waits for its output from outside (``respond`` commits it; ``deny``
    refuses it), not for leave to run: its tool never runs on a worker."""

    def for_approver(self) -> str:
        """What every screen shows an approver: the tool's own words for the call, when
        it has some, and always the call itself with every argument whole (an owner's
        describer may leave out what matters, or be cut; the arguments are what runs)."""
        whole = describe_arguments(self.tool_name, self.arguments)
        said = self.described_arguments
        return whole if not said or said == whole else f"{said}\n  the call: {whole}"

    run: str | None = None
    """The workflow run that asked (with the inline run's own name inside a user's
    workflow): a signed decision names it (``decision_digest``), so a token for this
    call is worth nothing for the same approval id asked by another run, after a reset
    or in the next inline run of the same workflow."""


#: How a session says no call waits under an approval id (the client knows it by this,
#: and answers with the ids that do wait).
NO_WAITING_CALL = "no call waits for a decision or its output under this id"


class ChildApprovals(Contract):
    """A sub-agent's undecided approvals, as it reports them to its parent session (a
    report of more than a page comes in pages, one signal each)."""

    child_id: str
    pending: list[PendingApproval]
    continued: bool = False
    """This page adds to the report before it (a report's first page replaces the last
    report)."""
