"""What the Session is told, as data: one class for each thing that can happen.

Everything that changes a session reaches it as one of these events, through
``Session.handle``: what people send (messages, decisions, cancellations), what the
worker found when the session opened (its prices, its tools), and what came of each
command (a model's answer, the verdicts of a check, the results of a batch). The
executor makes the events of commands; the workflow's handlers make people's.

The other direction is here too: the commands the Session answers with, one at a time,
for the workflow to carry out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, overload

from durable_agent._contracts.approvals import (
    ApprovalSignal,
    ChildApprovals,
    EscalationNotice,
    RevokeGrantSignal,
    TokenCheck,
    TokenVerdict,
)
from durable_agent._contracts.boundary import (
    AgentResult,
    BudgetSignal,
    CancelTurnSignal,
    EndSessionSignal,
    FlushSignal,
    GuardrailKind,
    GuardrailVerdict,
    MoveToAgentSignal,
    ResolvedTool,
    ResolveToolsResult,
)
from durable_agent._contracts.wake_ups import WakeUpRequest
from durable_agent._spec.document import ModelPrice
from durable_agent._spec.tool_kinds import CallTarget, Placement
from durable_agent._wire.messages import (
    ApprovalRecord,
    AssistantMessage,
    RecordedDecision,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)

# --- what a model call gives -----------------------------------------------------------


@dataclass(frozen=True)
class ModelReply:
    """The model's reply, with what the worker that made the call found out about it."""

    message: AssistantMessage
    left_out: int | None = None
    """Messages the request left out to fit the context budget, as the worker counted
    them (``None``: the workflow counts them)."""
    files_left_out: tuple[str, ...] = ()
    """What the request said of the files and images it left out."""
    called: frozenset[str] | None = None
    """The tools the reply calls, when the worker read its calls a page at a time."""
    arguments_checked: bool = False
    """The worker found every call's arguments to be a JSON object."""
    unbilled: tuple[Usage, ...] = ()
    """Tokens spent on earlier attempts whose replies were lost (billed all the same)."""


@dataclass(frozen=True)
class ModelFailure:
    """A model call that failed: its failure type, its words, and when to try again."""

    kind: str | None
    text: str
    retry_after: timedelta | None = None
    unbilled: tuple[Usage, ...] = ()


@dataclass(frozen=True)
class ModelCancelled:
    """A model call (or summary) ``cancel_turn`` stopped."""

    unbilled: tuple[Usage, ...] = ()


ModelOutcome = ModelReply | ModelFailure | ModelCancelled


# --- what people send ------------------------------------------------------------------


@dataclass(frozen=True)
class MessageArrived:
    """A user message, queued for the next turn boundary."""

    message: UserMessage


@dataclass(frozen=True)
class Injected:
    """A system or assistant message added at the next checkpoint, without a turn."""

    message: SystemMessage | AssistantMessage


@dataclass(frozen=True)
class EndRequested:
    request: EndSessionSignal


@dataclass(frozen=True)
class FlushRequested:
    request: FlushSignal


@dataclass(frozen=True)
class BudgetChanged:
    request: BudgetSignal


@dataclass(frozen=True)
class MoveRequested:
    """Someone asks a swarm to hand the conversation to another agent."""

    request: MoveToAgentSignal


@dataclass(frozen=True)
class CancelRequested:
    """Stop the current turn at its next checkpoint."""

    request: CancelTurnSignal


@dataclass(frozen=True)
class MoveToCurrentAsked:
    """A person asks a pinned session to go to the current build (``False``: the
    continue-as-new that would carry it was put off)."""

    asked: bool = True


@dataclass(frozen=True)
class DecisionArrived:
    """A person's decision on a waiting call (``key``: the update that sent it, whose
    caller waits for ``SessionView.decision_outcome``)."""

    signal: ApprovalSignal
    decision: RecordedDecision
    key: str | None = None


@dataclass(frozen=True)
class RevokeRequested:
    signal: RevokeGrantSignal
    key: str | None = None


@dataclass(frozen=True)
class DecisionOutcomeTold:
    """The update's caller has its answer: the Session forgets it."""

    key: str


@dataclass(frozen=True)
class ForwardsTaken:
    """The decisions for the child session ``child_id`` (``SessionView.forwards``) are
    the caller's to send from now on."""

    child_id: str


@dataclass(frozen=True)
class DecisionsTold:
    """The live feed told these decisions: ``SessionView.newly_decided`` keeps only
    ``waiting`` (decided, not yet told)."""

    waiting: list[str]


@dataclass(frozen=True)
class ChildApprovalsReported:
    """A sub-agent session's undecided approvals, as it reports them."""

    report: ChildApprovals


@dataclass(frozen=True)
class Refused:
    """A request was refused before it reached the rules (unreadable, say): ``status``
    lists it."""

    text: str


# --- what the worker says as the session opens -----------------------------------------


@dataclass(frozen=True)
class Admitted:
    """The worker admitted the spec, with its prices for the models named without one."""

    prices: dict[str, ModelPrice]


@dataclass(frozen=True)
class ToolsResolved:
    """The function tools, as the workers described them."""

    result: ResolveToolsResult


@dataclass(frozen=True)
class ToolsAdded:
    """Tools from MCP servers, OpenAPI documents or toolsets."""

    tools: list[ResolvedTool]


@dataclass(frozen=True)
class SubAgentsAdded:
    """The spec's sub-agents become tools (each call a child session)."""


# --- what came of a command ------------------------------------------------------------


@dataclass(frozen=True)
class ModelAnswered:
    outcome: ModelOutcome


@dataclass(frozen=True)
class SummaryAnswered:
    outcome: ModelOutcome


@dataclass(frozen=True)
class ModelCallSent:
    """A model call goes out: a limiter's word from here on is for it."""


@dataclass(frozen=True)
class WaitingForCapacity:
    """The model call waits for capacity on a limited endpoint (``None``: no longer)."""

    endpoint: str | None


@dataclass(frozen=True)
class CapacityKept:
    """The endpoint's limiter keeps capacity for the waiting model call."""


@dataclass(frozen=True)
class GuardrailsChecked:
    """The verdict on the message or answer being checked (``failure``: the guardrail
    kept failing, and the turn fails closed with its words)."""

    verdict: GuardrailVerdict | None
    failure: str | None = None


@dataclass(frozen=True)
class ApprovalsChecked:
    """The workers' predicates' answers for the batch's page."""

    verdicts: list[bool]


@dataclass(frozen=True)
class CallsDescribed:
    """The tools' own readable forms of the page's calls waiting for people."""

    descriptions: list[str]


@dataclass(frozen=True)
class TokensChecked:
    """The workers' word on each signed decision."""

    verdicts: list[TokenVerdict]


@dataclass(frozen=True)
class EscalationSent:
    pass


@dataclass(frozen=True)
class DeadlinesPassed:
    """A page of the waiting ``ids`` whose deadline passed takes its tool's default (or
    is escalated)."""

    ids: list[str]


@dataclass(frozen=True)
class ApprovalsWaited:
    """The wait for the batch's approvals is over: the decisions go into the batch."""


@dataclass(frozen=True)
class ChildStarted:
    """A sub-agent call of the open batch runs as the child session ``child_id``."""

    child_id: str


@dataclass(frozen=True)
class ToolArrived:
    """A call's result, as it arrives: placed in its slot."""

    slot: int
    result: ToolMessage


@dataclass(frozen=True)
class ToolsFinished:
    """The batch's calls are done (``results``: by slot, those not told as they arrived)."""

    results: dict[int, ToolMessage]


@dataclass(frozen=True)
class IdleTimedOut:
    """No message came within the idle timeout."""


@dataclass(frozen=True)
class ContinueAsNewDeferred:
    """The state did not fit one payload: go on in this run until more work is done."""


@dataclass(frozen=True)
class WakeUpSet:
    """A starter sets a wake-up (``set_wake_up``); ``asked``: when (its validator asks
    before the update is sent, so the event says the time it is judged at)."""

    request: WakeUpRequest
    asked: datetime


@dataclass(frozen=True)
class WakeUpCancelled:
    """A starter cancels a wake-up (``cancel_wake_up``)."""

    wake_up_id: str


Event = (
    MessageArrived
    | Injected
    | EndRequested
    | FlushRequested
    | BudgetChanged
    | MoveRequested
    | CancelRequested
    | MoveToCurrentAsked
    | DecisionArrived
    | RevokeRequested
    | DecisionOutcomeTold
    | ForwardsTaken
    | DecisionsTold
    | ChildApprovalsReported
    | Refused
    | Admitted
    | ToolsResolved
    | ToolsAdded
    | SubAgentsAdded
    | ModelAnswered
    | SummaryAnswered
    | ModelCallSent
    | WaitingForCapacity
    | CapacityKept
    | GuardrailsChecked
    | ApprovalsChecked
    | CallsDescribed
    | TokensChecked
    | EscalationSent
    | DeadlinesPassed
    | ApprovalsWaited
    | ChildStarted
    | ToolArrived
    | ToolsFinished
    | IdleTimedOut
    | ContinueAsNewDeferred
    | WakeUpSet
    | WakeUpCancelled
)
"""Everything ``Session.handle`` takes."""

#: The events a workflow's validators and queries may ask about before they are sent
#: (``SessionView.refusal``): what would refuse them, without changing anything.
Checked = (
    MessageArrived | Injected | DecisionArrived | RevokeRequested | WakeUpSet | WakeUpCancelled
)


# What the Session asks the workflow to do next: one command at a time.
#
# The Session decides; the workflow carries the command out (an activity, a durable
# wait, continue-as-new, the end) and reports back with an event (a Session method).

@dataclass(frozen=True)
class CallModel:
    """Ask the model for the next turn (number ``turn``)."""

    turn: int


@dataclass(frozen=True)
class Summarise:
    """Ask the summarising model for a summary of the array's first ``until`` messages
    (compaction, before model call ``turn``)."""

    turn: int
    until: int


@dataclass(frozen=True)
class CheckGuardrails:
    """Run these guardrails (an activity) on one text."""

    kind: GuardrailKind
    names: list[str]
    text: str


@dataclass(frozen=True)
class Pause:
    """Wait on a durable timer: before trying the model again (one of its attempts
    failed), or between two pages of a large batch's judging or of a grant's approvals
    (each page is then a workflow task of its own)."""

    delay: timedelta


@dataclass(frozen=True)
class CheckApprovals:
    """Ask predicates (an activity) about these calls: the tools' own, or the named ones
    of the spec's rules (``predicates``, one per call; ``None``: every call's tool's)."""

    calls: list[ToolCall]
    predicates: list[str | None] | None = None


@dataclass(frozen=True)
class DescribeCalls:
    """Ask the tools (an activity) for readable forms of calls that wait for a person."""

    calls: list[ToolCall]


@dataclass(frozen=True)
class VerifyTokens:
    """Have the workers check signed decisions (with keys only they hold)."""

    checks: list[TokenCheck]


@dataclass(frozen=True)
class NotifyEscalation:
    """Tell a second group that calls wait for them (an activity)."""

    notice: EscalationNotice


@dataclass(frozen=True)
class AwaitApprovals:
    """Wait for people's decisions on these approval ids (deadlines are durable timers)."""

    ids: list[str]


@dataclass(frozen=True)
class ToolRun:
    """One approved call: its slot in the batch, its tool as recorded, how it was approved,
    and the session context values bound to its parameters."""

    slot: int
    call: ToolCall
    tool: ResolvedTool
    approval: ApprovalRecord | None
    bound: dict[str, Any] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)
    """The session's secret names, when the call references any."""
    target: CallTarget | None = None
    """What the call needs besides its arguments, from its tool's kind (a sub-agent's
    spec, an MCP server, an operation; ``None`` for a function)."""
    runs_in: Placement = "worker"
    """Its kind's place: an activity, or a child session (a sub-agent)."""
    agent_name: str | None = None
    """The swarm agent that made the call (recorded on its result)."""


class ToolRuns(Sequence[ToolRun]):
    """A group's calls, each made into its ``ToolRun`` when asked for: a runner takes
    the next call when its own is done, so a batch of thousands costs each task the
    calls it starts, not the whole batch in the task that opens it. Not kept (each is
    made again if asked for again, equal): a run is let go with the call it made, not
    with its batch's thousands in the task after the last result."""

    def __init__(self, slots: Sequence[int], make: Callable[[int], ToolRun]) -> None:
        self._slots = slots
        self._make = make

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, index: int) -> ToolRun: ...
    @overload
    def __getitem__(self, index: slice) -> list[ToolRun]: ...

    def __getitem__(self, index: int | slice) -> ToolRun | list[ToolRun]:
        if isinstance(index, slice):
            return [self[k] for k in range(len(self))[index]]
        return self._make(self._slots[index])


@dataclass(frozen=True)
class RunTools:
    """Run these groups one after another; the calls of a group may overlap (in waves of
    at most ``max_concurrent``)."""

    turn: int
    groups: list[ToolRuns]
    max_concurrent: int


@dataclass(frozen=True)
class WaitForMessage:
    """Idle until a message, the end of the session, or a continue-as-new is due."""

    timeout: timedelta | None


@dataclass(frozen=True)
class ContinueAsNew:
    """Hand the session to a fresh run (the Session's state is what it carries);
    ``upgrade``: on the build the workers' owner made current, not this run's."""

    upgrade: bool = False


@dataclass(frozen=True)
class Finish:
    """The session is over."""

    result: AgentResult


Command = (
    CallModel
    | Summarise
    | CheckGuardrails
    | Pause
    | CheckApprovals
    | DescribeCalls
    | VerifyTokens
    | NotifyEscalation
    | AwaitApprovals
    | RunTools
    | WaitForMessage
    | ContinueAsNew
    | Finish
)
