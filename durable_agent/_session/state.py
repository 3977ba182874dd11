"""What a session carries across continue-as-new: one object, owned by the Session and
handed to the next run as it is, with a slice for each of the Session's parts.
Workflow-private: users never write it.

Beside it: small pure rules of the turn loop (the model setup's digest, tool overrides,
where a conversation stands, approval ids, execution groups, retry delays), and how a
fresh session's conversation opens."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from durable_agent._contracts.approvals import (
    ApprovalSignal,
    DecisionKind,
    Grant,
    PendingApproval,
    RevokeGrantSignal,
)
from durable_agent._contracts.boundary import (
    BudgetSignal,
    CancelTurnSignal,
    EndSessionSignal,
    FlushSignal,
    ModelSetup,
    ModelSpend,
    MoveToAgentSignal,
    ResolvedTool,
    Stage,
    TranscriptRef,
)
from durable_agent._contracts.wake_ups import WakeUpsState
from durable_agent._spec.document import AgentInput, AgentSpec, ToolSettings
from durable_agent._spec.tools import ExecutionMode, ToolPolicy, stricter_settings
from durable_agent._wire.messages import (
    ApprovalRecord,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from durable_agent._wire.transcript import Transcript, kept_apart


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
    wake_ups: WakeUpsState = Field(
        default_factory=WakeUpsState, exclude_if=lambda w: not w.pending and not w.made
    )
    """The ``WakeUps`` part's (left out while none was ever set, so the carried state of
    a session without wake-ups reads as it always did)."""

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


# Small pure rules of the turn loop: the model setup's digest, tool overrides, where a
# conversation stands, titles, approval ids, execution groups and retry delays.

def setup_digest(setup: ModelSetup) -> str:
    """Content hash of a session's model setup (canonical JSON; an unset field is left
    out, so a setup hashes the same whatever fields it does not use)."""
    later = ("context", "agent", "instructions", "inputs", "hooks", "price")
    unset = {k for k in later if getattr(setup, k) is None}
    data = setup.model_dump(mode="json", exclude=unset)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def apply_overrides(
    listed: Sequence[ToolSettings], execution: ExecutionMode, resolved: Sequence[ResolvedTool]
) -> dict[str, ResolvedTool]:
    """The listed tools with their per-session policy overrides applied: over a tool
    the worker's owner gates, only those that make it stricter."""
    by_name = {t.definition.name: t for t in resolved}
    tools: dict[str, ResolvedTool] = {}
    for settings in listed:
        base = by_name[settings.name]
        update = {
            key: value
            for key, value in settings.model_dump(exclude={"name"}).items()
            if value is not None
        }
        if base.floor is not None:
            update = stricter_settings(base.policy, update)
        if execution == "sequential":
            update["execution_mode"] = "sequential"
        policy = base.policy.model_copy(update=update) if update else base.policy
        tools[settings.name] = base.model_copy(update={"policy": policy})
    return tools


def stage_after(messages: Sequence[Message]) -> Stage:
    """What a conversation given at start needs next: an answer when it ends with a user
    or tool message; otherwise nothing until someone writes. Calls left unanswered in a
    given history are never executed (the wire answers them with an error result)."""
    if messages and isinstance(messages[-1], UserMessage | ToolMessage):
        return "model"
    return "idle"


def approval_id(turn: int, slot: int) -> str:
    """Unique per pending call within a session, and stable across replays."""
    return f"turn{turn}-call{slot}"


def execution_groups(slots: Sequence[int], modes: Sequence[ExecutionMode]) -> list[list[int]]:
    """Runs of calls that may overlap, in request order: consecutive parallel calls run
    together; a sequential call runs alone, never overlapping another call."""
    groups: list[list[int]] = []
    joinable = False
    for slot, mode in zip(slots, modes, strict=True):
        if mode == "parallel" and joinable:
            groups[-1].append(slot)
        else:
            groups.append([slot])
        joinable = mode == "parallel"
    return groups


MAX_TOOL_RETRY_SECONDS = 60.0


def tool_retry_delay(policy: ToolPolicy, attempt: int) -> timedelta | None:
    """After the tool's own failure on ``attempt``: the wait before the next attempt, or
    ``None`` when that was its last."""
    if attempt >= policy.max_attempts:
        return None
    return backoff(policy.initial_retry_seconds, MAX_TOOL_RETRY_SECONDS, attempt)


def backoff(initial: float, maximum: float, failures: int) -> timedelta:
    """The wait before the next attempt after ``failures`` failed ones (1, 2, 4, ... times
    ``initial``, at most ``maximum``)."""
    return timedelta(seconds=min(initial * 2 ** max(failures - 1, 0), maximum))


def epoch_ms(now: datetime) -> int:
    """A message's ``timestamp``: milliseconds since the epoch, from the time given."""
    return int(now.timestamp() * 1000)


def last_reply(messages: Sequence[Message]) -> AssistantMessage | ToolMessage | None:
    """The latest message the model or a tool wrote (a session's final word)."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage | ToolMessage):
            return message
    return None


def latest_finish_reason(messages: Sequence[Message]) -> str | None:
    """How the model's latest turn ended, as the provider said."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return message.finish_reason
    return None


# How a fresh session's conversation opens: the active agent's instructions, the given
# history, and the first message (queued for the input guardrails when there are any).

def open_conversation(
    spec: AgentSpec,
    messages: Transcript,
    request: AgentInput,
    agent: tuple[str | None, str | None],
    now: datetime,
) -> UserMessage | None:
    """Fill the array (empty, or an ended run's when resuming); the first message when
    input guardrails check it before it joins. The history given joins exactly as
    given (as a long one read back from the store does); what the session adds gets
    its stable id. ``agent``: the name and instructions of a
    swarm's first agent (``None, None`` for one agent)."""
    at = epoch_ms(now)
    name = agent[0]
    system = instructions_message(spec, agent, now)
    if system is not None and not messages:  # a resumed conversation has its own already
        messages.join(system)
    history = list(request.history)
    first = request.message
    if isinstance(first, str):
        first = UserMessage(content=first)
    if first is not None:
        first = kept_apart(first).model_copy(
            update={"timestamp": at, "agent_name": name, "mode": first.mode or "user"}
        )
    guarded = bool(spec.guardrails.input)
    last = history[-1] if history else None
    if guarded and first is None and isinstance(last, UserMessage):
        history.pop()  # the message that starts the turn is checked first
        first = kept_apart(last)
    messages.extend(history)  # a history given is kept exactly as given
    if first is not None and guarded:
        return first
    if first is not None:
        messages.join(first)
    return None


def instructions_message(
    spec: AgentSpec, agent: tuple[str | None, str | None], now: datetime
) -> SystemMessage | None:
    """The system message a fresh conversation opens with (none without instructions)."""
    name, agent_instructions = agent
    instructions = agent_instructions if name is not None else spec.instructions
    if not instructions:
        return None
    return SystemMessage(content=instructions, timestamp=epoch_ms(now), agent_name=name)
