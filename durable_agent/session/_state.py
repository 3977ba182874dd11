"""What a session carries across continue-as-new: one object, owned by the Session and
handed to the next run as it is. Workflow-private: users never write it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from durable_agent.core import (
    ApprovalRecord,
    ApprovalSignal,
    AssistantMessage,
    BudgetSignal,
    CancelTurnSignal,
    DecisionKind,
    EndSessionSignal,
    FlushSignal,
    Grant,
    Message,
    ModelSpend,
    MoveToAgentSignal,
    PendingApproval,
    ResolvedTool,
    RevokeGrantSignal,
    Stage,
    SystemMessage,
    TranscriptRef,
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


class SessionState(BaseModel):
    """Everything a session carries across continue-as-new."""

    model_config = ConfigDict(extra="forbid")

    messages: list[Message] = Field(default_factory=list)
    """The array; empty when it travels by ``transcript`` instead (too big for one payload)."""
    transcript: TranscriptRef | None = None
    stored_count: int = 0
    """How many of ``messages`` the workers' transcript store holds (by chain hash)."""
    chain: Literal[2] | None = None
    """The transcript's chain (``transcript.chain_of``): 2 for sessions opened since
    ``CHAIN_V2_PATCH``, ``None`` (the first) before; kept for the session's life."""
    stage: Stage = "idle"
    turn: int = 0
    model_calls_this_reply: int = 0
    usage: Usage = Field(default_factory=Usage)
    tools: list[ResolvedTool] = Field(default_factory=list)
    pending: list[PendingApproval] = Field(default_factory=list)
    decisions: dict[str, ApprovalRecord] = Field(default_factory=dict)
    inbox: list[UserMessage] = Field(default_factory=list)
    injected: list[SystemMessage | AssistantMessage] = Field(default_factory=list)
    """System notices and assistant messages a program added (``inject_message``), for
    the array at the next safe point; they start no turn."""
    rejected_signals: list[str] = Field(default_factory=list)
    last_error: str | None = None
    ending: EndSessionSignal | None = None
    runs: int = 1
    """Runs of this session so far (1 + continue-as-new cycles)."""
    cost_usd: float = 0.0
    """Spent by ``model.price`` (summaries included)."""
    spend: dict[str, ModelSpend] = Field(default_factory=dict)
    """The same, by model (and by tool, for sub-agents)."""
    cancel: CancelTurnSignal | None = None
    """A ``cancel_turn`` waiting for the next safe point."""
    flushes: list[FlushSignal] = Field(default_factory=list)
    """``flush`` requests waiting for the turn to end."""
    budget: BudgetSignal | None = None
    """Limits set by ``set_budget`` (over the spec's)."""
    child_pending: dict[str, list[PendingApproval]] = Field(default_factory=dict)
    """Sub-agent sessions' undecided approvals, by child session id (as they reported)."""
    forwards: list[tuple[str, str, ApprovalSignal]] = Field(default_factory=list)
    """Decisions made through this session for a child's approval, to pass on:
    (child session id, ``approve``/``deny``, the signal with the child's own id)."""
    agent: str | None = None
    """A swarm's active agent."""
    agent_stack: list[str] = Field(default_factory=list)
    """Where ``transfer_back`` goes, the most recent last."""
    agent_tools: dict[str, list[ResolvedTool]] = Field(default_factory=dict)
    """Each swarm agent's own tools, as resolved at start with its overrides."""
    move: MoveToAgentSignal | None = None
    """A person's ``move_to_agent`` waiting for the next safe point."""
    move_to_current: bool = False
    """A person asked this (pinned) session to go to the current build at its next turn
    boundary."""
    grants: list[Grant] = Field(default_factory=list)
    """Standing "always" approvals, in the order they were made."""
    grants_made: int = 0
    sweeps: dict[str, int] = Field(default_factory=dict)
    """Grants still approving the calls that wait, one page per workflow task: by grant id, how far
    into ``pending`` each has come (``durable_agent/session/_sweeps.py``)."""
    accepted: dict[str, ApprovalSignal] = Field(default_factory=dict)
    """The decisions behind ``decisions`` that carry more than a verdict (edited arguments,
    a person's response), by approval id."""
    unverified: list[Unverified] = Field(default_factory=list)
    to_notify: list[str] = Field(default_factory=list)
    """Approval ids escalated whose second group is still to be told."""
    rescues_this_reply: int = 0
    rescue_after_tools: str | None = None
    """An unusable turn whose calls run first (strategy ``correct``): why, for the
    ``resque`` message that follows its results."""
