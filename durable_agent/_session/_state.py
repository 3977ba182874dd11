"""What a session carries across continue-as-new: one object, owned by the Session and
handed to the next run as it is, with a slice for each of the Session's parts.
Workflow-private: users never write it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from durable_agent._contracts._approval_contracts import (
    ApprovalSignal,
    DecisionKind,
    Grant,
    PendingApproval,
    RevokeGrantSignal,
)
from durable_agent._contracts._contracts import (
    BudgetSignal,
    CancelTurnSignal,
    EndSessionSignal,
    FlushSignal,
    ModelSpend,
    MoveToAgentSignal,
    ResolvedTool,
    Stage,
    TranscriptRef,
)
from durable_agent._wire._messages import (
    ApprovalRecord,
    AssistantMessage,
    Message,
    SystemMessage,
    Usage,
    UserMessage,
)


class Unverified(BaseModel):
    """A signed decision (or revocation) waiting for the workers to check its token."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: DecisionKind | Literal["revoke"]
    decision: ApprovalSignal | None = None
    revoke: RevokeGrantSignal | None = None
    key: str | None = None
    """The update that sent it (its caller waits for the outcome)."""


class ApprovalsState(BaseModel):
    """The ``Approvals`` part's: the calls asked and the decisions recorded for them."""

    model_config = ConfigDict(extra="forbid")

    pending: list[PendingApproval] = Field(default_factory=list)
    decisions: dict[str, ApprovalRecord] = Field(default_factory=dict)
    accepted: dict[str, ApprovalSignal] = Field(default_factory=dict)
    """The decisions behind ``decisions`` that carry more than a verdict (edited arguments,
    a person's response), by approval id."""
    to_notify: list[str] = Field(default_factory=list)
    """Approval ids escalated whose second group is still to be told."""


class GateState(BaseModel):
    """The ``Gate`` part's: standing "always" approvals."""

    model_config = ConfigDict(extra="forbid")

    grants: list[Grant] = Field(default_factory=list)
    """In the order they were made."""
    grants_made: int = 0


class DecisionsState(BaseModel):
    """The ``Decisions`` part's: signed decisions waiting for their check, and the
    approvals of sub-agents decided through this session."""

    model_config = ConfigDict(extra="forbid")

    unverified: list[Unverified] = Field(default_factory=list)
    child_pending: dict[str, list[PendingApproval]] = Field(default_factory=dict)
    """Sub-agent sessions' undecided approvals, by child session id (as they reported)."""
    forwards: list[tuple[str, str, ApprovalSignal]] = Field(default_factory=list)
    """Decisions made through this session for a child's approval, to pass on:
    (child session id, ``approve``/``deny``, the signal with the child's own id)."""


class BudgetState(BaseModel):
    """The ``Budget`` part's: what the session spent, and the limits set on it."""

    model_config = ConfigDict(extra="forbid")

    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    """Spent by ``model.price`` (summaries included)."""
    spend: dict[str, ModelSpend] = Field(default_factory=dict)
    """The same, by model (and by tool, for sub-agents)."""
    limits: BudgetSignal | None = None
    """Limits set by ``set_budget`` (over the spec's)."""


class SwarmState(BaseModel):
    """The ``Swarm`` part's: which agent answers, and where ``transfer_back`` goes."""

    model_config = ConfigDict(extra="forbid")

    agent: str | None = None
    agent_stack: list[str] = Field(default_factory=list)
    """The most recent last."""
    agent_tools: dict[str, list[ResolvedTool]] = Field(default_factory=dict)
    """Each agent's own tools, as resolved at start with its overrides."""


class RequestsState(BaseModel):
    """The ``Requests`` part's: what people sent that waits for a checkpoint."""

    model_config = ConfigDict(extra="forbid")

    inbox: list[UserMessage] = Field(default_factory=list)
    injected: list[SystemMessage | AssistantMessage] = Field(default_factory=list)
    """System notices and assistant messages a program added (``inject_message``), for
    the array at the next checkpoint; they start no turn."""
    rejected_signals: list[str] = Field(default_factory=list)
    ending: EndSessionSignal | None = None
    flushes: list[FlushSignal] = Field(default_factory=list)
    """``flush`` requests waiting for the turn to end."""
    move: MoveToAgentSignal | None = None
    """A person's ``move_to_agent`` waiting for the next checkpoint."""


class RescueState(BaseModel):
    """The ``Rescue`` part's: attempts at rescuing the current reply."""

    model_config = ConfigDict(extra="forbid")

    attempts: int = 0
    """Rescues of the reply being made (none yet: 0)."""
    after_tools: str | None = None
    """An unusable turn whose calls run first (strategy ``correct``): why, for the
    rescue message that follows its results."""


#: Where each field of a state carried in one flat object (runs recorded before the
#: parts had slices of their own) goes now: (slice, field in it).
_FLAT_FIELDS: dict[str, tuple[str, str]] = {
    **{name: ("approvals", name) for name in ("pending", "decisions", "accepted", "to_notify")},
    **{name: ("gate", name) for name in ("grants", "grants_made")},
    **{name: ("decisions", name) for name in ("unverified", "child_pending", "forwards")},
    **{name: ("budget", name) for name in ("usage", "cost_usd", "spend")},
    "budget": ("budget", "limits"),
    **{name: ("swarm", name) for name in ("agent", "agent_stack", "agent_tools")},
    **{
        name: ("requests", name)
        for name in ("inbox", "injected", "rejected_signals", "ending", "flushes", "move")
    },
    "rescues_this_reply": ("rescue", "attempts"),
    "rescue_after_tools": ("rescue", "after_tools"),
}


class SessionState(BaseModel):
    """Everything a session carries across continue-as-new: the loop's own fields, and
    one slice for each of the Session's parts, which only that part reads and writes."""

    model_config = ConfigDict(extra="forbid")

    messages: list[Message] = Field(default_factory=list)
    """The array; empty when it travels by ``transcript`` instead (too big for one payload)."""
    transcript: TranscriptRef | None = None
    stored_count: int = 0
    """How many of ``messages`` the workers' transcript store holds (by chain hash)."""
    chain: Literal[2] | None = None
    """The transcript's chain (``transcript.hash_version``): 2 for sessions opened since
    ``CHAIN_V2_PATCH``, ``None`` (the first) before; kept for the session's life."""
    stage: Stage = "idle"
    turn: int = 0
    model_calls_this_reply: int = 0
    last_error: str | None = None
    runs: int = 1
    """Runs of this session so far (1 + continue-as-new cycles)."""
    cancel: CancelTurnSignal | None = None
    """A ``cancel_turn`` waiting for the next checkpoint."""
    move_to_current: bool = False
    """A person asked this (pinned) session to go to the current build at its next turn
    boundary."""
    message_ids: bool = False
    """Every message the session adds to the array gets a stable id (``message_id``): sessions
    opened since ``MESSAGE_IDS_PATCH``, for their whole life. A session opened before
    keeps its array as it was, so the stored transcript and recorded runs still match."""

    tools: list[ResolvedTool] = Field(default_factory=list)
    """The ``Toolbox`` part's: every tool the session resolved."""
    sweeps: dict[str, int] = Field(default_factory=dict)
    """The ``StandingGrants`` part's: grants still approving the calls that wait, one page
    per workflow task; by grant id, how far into the pending calls each has come."""
    approvals: ApprovalsState = Field(default_factory=ApprovalsState)
    gate: GateState = Field(default_factory=GateState)
    decisions: DecisionsState = Field(default_factory=DecisionsState)
    budget: BudgetState = Field(default_factory=BudgetState)
    swarm: SwarmState = Field(default_factory=SwarmState)
    requests: RequestsState = Field(default_factory=RequestsState)
    rescue: RescueState = Field(default_factory=RescueState)

    @model_validator(mode="before")
    @classmethod
    def _from_flat(cls, data: Any) -> Any:
        """A state carried by a run recorded before the parts had slices is one flat
        object (it always has ``pending``; the sliced state never has it at the top): each
        field goes to the slice of the part that owns it now."""
        if not isinstance(data, dict) or "pending" not in data:
            return data
        sliced: dict[str, Any] = {}
        slices: dict[str, dict[str, Any]] = {}
        for name, value in data.items():
            if name in _FLAT_FIELDS:
                part, field = _FLAT_FIELDS[name]
                slices.setdefault(part, {})[field] = value
            else:
                sliced[name] = value
        return {**sliced, **slices}
