"""What the runtime knows of a tool besides its code: its policy (approval, execution
mode, time limit, retries, task queue), the floor its owner set, and the context a call
is made in. Pure data: the session records these, and the workflow reads them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from durable_agent._errors import DurableAgentError
from durable_agent._wire._messages import ApprovalDecision, Usage

ApprovalMode = Literal["never", "always", "predicate", "deny"]
#: How much an approval mode holds a call back: a session may move a tool its owner
#: gates only up this scale, never down.
APPROVAL_STRICTNESS: dict[ApprovalMode, int] = {"never": 0, "predicate": 1, "always": 2, "deny": 3}
ExecutionMode = Literal["parallel", "sequential"]
ApprovalPredicate = Callable[[dict[str, Any]], bool]
CallDescriber = Callable[[dict[str, Any]], str]
"""The validated arguments of a call waiting for a person -> a short readable summary."""
NamedPredicate = Callable[[str, dict[str, Any]], bool]
"""A rule's predicate (``@approval_predicate``): (tool name, arguments) -> matches."""
EscalationNotifier = Callable[..., Any]
"""Called with an ``EscalationNotice`` when calls wait for a second group; sync or async."""
EffectCheck = Callable[["ToolContext"], Any]
"""Given a call's context (its idempotency key), the call's result if its effect already
happened, else ``None``; sync or async."""


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about the call it serves (inject by typing a parameter)."""

    session_id: str
    turn: int
    slot: int
    tool_call_id: str
    idempotency_key: str
    """``<session id>:<turn>:<slot>``: the same on every retry and after a worker crash,
    so a tool with side effects can deduplicate them."""
    attempt: int = 1
    """The tool's own attempt: 1 + the times this call raised or timed out before."""
    context: dict[str, Any] = field(default_factory=dict)
    """The values bound for this call from the session's ``context``."""
    redelivery: int = 0
    """Times this attempt was started again because the worker running it was lost
    (killed, cut off, shut down): its effect may already have happened."""
    _spent: list[Usage] = field(default_factory=list, repr=False, compare=False)

    def report_usage(self, usage: Usage) -> None:
        """Count model tokens this call spent (a tool that runs a sub-agent or asks a
        model itself) toward the session's usage and budget; kept on its result."""
        self._spent.append(usage)

    @property
    def usage(self) -> Usage | None:
        """Model tokens the tool reported spending, if it did."""
        if not self._spent:
            return None
        total = self._spent[0]
        for more in self._spent[1:]:
            total = total + more
        return total


class ToolPolicy(BaseModel):
    """How the runtime treats a tool; JSON so a session can record and override it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approval: ApprovalMode = "never"
    """``never``; ``always``; ``predicate`` (the tool's predicate over the validated
    arguments decides); ``deny`` (never runs: a per-session ban)."""
    deny_reason: str = "not allowed in this session"
    execution_mode: ExecutionMode = "parallel"
    timeout_seconds: float = Field(default=300.0, gt=0)
    """The tool's own limit per attempt, enforced by the activity (overrunning it is one
    of ``max_attempts``)."""
    max_attempts: int = Field(default=3, ge=1)
    """Attempts when the tool raises or overruns ``timeout_seconds`` (1: no retry). Bad
    arguments are never retried; a lost worker never uses one up."""
    initial_retry_seconds: float = Field(default=1.0, gt=0)
    task_queue: str | None = None
    """Run on another worker pool (a GPU box, a network zone); default: the session's."""
    approval_timeout_seconds: float | None = Field(default=None, gt=0)
    approval_timeout_decision: ApprovalDecision = "denied"
    max_result_chars: int = Field(default=100_000, ge=100)
    """Longer results are cut to this many characters with a marker saying so (the
    whole result is kept in the transcript store and named in the marker and the log)."""
    approvers: list[str] | None = None
    """Who may decide this tool's calls (unset: the session's ``approvals.approvers``).
    Naming them without an ``approval`` mode gates every call."""
    external_output: bool | None = None
    """The call's output comes from outside (a page, another system): the tool never
    runs on a worker; its calls wait until someone who may decide them commits the
    output (``respond``), or are denied. Only the tool's owner sets it (a session's
    settings have no such field)."""

    @model_validator(mode="before")
    @classmethod
    def _approvers_gate(cls, data: Any) -> Any:
        """Approvers named without an approval mode gate every call: who may decide is
        moot for a call nobody is asked about."""
        if isinstance(data, dict) and data.get("approvers") and "approval" not in data:
            return {**data, "approval": "always"}
        return data


class OwnerGates(BaseModel):
    """What the worker's owner set on a tool that gates its calls, kept with the tool:
    a session's settings and rules may make it stricter, never looser."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    approval: ApprovalMode = "never"
    approvers: list[str] | None = None
    """Only these may decide its calls, and only with a signed decision."""
    external_output: bool | None = None
    """Its calls' output comes from outside (``ToolPolicy.external_output``)."""

    @classmethod
    def of(cls, policy: ToolPolicy) -> OwnerGates | None:
        """The floor a registered policy sets (``None``: the owner gates nothing)."""
        gates = policy.approval != "never" or policy.approvers is not None
        if not gates and not policy.external_output:
            return None
        return cls(
            approval=policy.approval,
            approvers=policy.approvers,
            external_output=policy.external_output,
        )


def stricter_settings(owner: ToolPolicy, asked: dict[str, Any]) -> dict[str, Any]:
    """The per-session settings ``asked`` over a tool whose owner gates it, keeping only
    what makes it stricter: a stricter approval mode, approvers among the owner's (names
    outside the owner's list count for nothing), a deadline that denies (one that
    approves only if the owner's does, never sooner)."""
    kept = dict(asked)
    mode = kept.get("approval")
    if mode is not None and APPROVAL_STRICTNESS[mode] < APPROVAL_STRICTNESS[owner.approval]:
        del kept["approval"]
    if owner.approvers is not None:  # a session may choose among the owner's approvers
        chosen = [n for n in kept.get("approvers") or () if n in owner.approvers]
        kept["approvers"] = chosen or owner.approvers
    if owner.approval_timeout_decision == "denied" and "approval_timeout_decision" in kept:
        kept["approval_timeout_decision"] = "denied"
    approves = kept.get("approval_timeout_decision", owner.approval_timeout_decision)
    sooner = kept.get("approval_timeout_seconds")
    if approves == "approved" and sooner is not None:
        floor = owner.approval_timeout_seconds
        if floor is None or sooner < floor:
            del kept["approval_timeout_seconds"]
    return kept


class ToolArgumentsError(DurableAgentError, ValueError):
    """The model's arguments could not be used; the text is shown to the model."""
