"""What the Session is told, as data: one class for each thing that can happen.

Everything that changes a session reaches it as one of these events, through
``Session.handle``: what people send (messages, decisions, cancellations), what the
worker found when the session opened (its prices, its tools), and what came of each
command (a model's answer, the verdicts of a check, the results of a batch). The
executor makes the events of commands; the workflow's handlers make people's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from durable_agent._contracts._approval_contracts import (
    ApprovalSignal,
    ChildApprovals,
    RevokeGrantSignal,
    TokenVerdict,
)
from durable_agent._contracts._contracts import (
    BudgetSignal,
    CancelTurnSignal,
    EndSessionSignal,
    FlushSignal,
    GuardrailVerdict,
    MoveToAgentSignal,
    ResolvedTool,
    ResolveToolsResult,
)
from durable_agent._spec._spec import ModelPrice
from durable_agent._wire._messages import (
    AssistantMessage,
    RecordedDecision,
    SystemMessage,
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
)
"""Everything ``Session.handle`` takes."""

#: The events a workflow's validators and queries may ask about before they are sent
#: (``SessionView.refusal``): what would refuse them, without changing anything.
Checked = MessageArrived | Injected | DecisionArrived | RevokeRequested
