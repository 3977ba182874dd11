"""What crosses the workflow boundary: activity inputs, signals, query answers.

Kept lean: every activity input and result is stored in history forever.

Also what a worker tells the workflow of the messages it hands over (``ToolReturn``,
``ModelReturn``: each one's content hash and size), so the workflow joins them to the
array without encoding or hashing them itself.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import Discriminator, Field, Tag, model_validator

from durable_agent._contracts.approvals import Grant, PendingApproval
from durable_agent._contracts.wake_ups import WakeUp
from durable_agent._errors import DurableAgentError
from durable_agent._spec.document import AgentSpec, Fork, HookNames, ModelPrice, ToolSource
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._spec.tool_kinds import RecordedCall, legacy_tool_call
from durable_agent._spec.tool_kinds import ResolvedTool as ResolvedTool
from durable_agent._spec.tools import sources_from_old_fields
from durable_agent._wire.context import ContextRules
from durable_agent._wire.messages import (
    ApprovalRecord,
    AssistantMessage,
    Contract,
    Message,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
)
from durable_agent._wire.options import ModelOptions, ReasoningWire
from durable_agent._wire.outgoing import ModelInputs
from durable_agent._wire.transcript import content_hash, json_digest, payload_bytes

WORKFLOW_NAME = "AgentWorkflow"
#: A person sends a pinned session to the current build (``SessionHandle.move_to_current``).
MOVE_TO_CURRENT_SIGNAL = "move_to_current_build"
#: Wakes a session to look which build is current (an idle ``auto`` session moves).
BUILD_CHANGED_SIGNAL = "build_changed"
DEFAULT_TASK_QUEUE = "durable-agent"
#: Seconds a tool activity's start-to-close exceeds the tool's own limit, which the
#: activity enforces itself: a start-to-close timeout then means a wedged worker.
TOOL_TIMEOUT_GRACE_SECONDS = 5.0


class ResolveToolsInput(Contract):
    names: list[str]
    guardrails: list[str] = Field(default_factory=list)
    hooks: list[str] = Field(default_factory=list)
    """Approval predicates and escalation notifiers the spec names."""


class Handoff(Contract):
    to: str | None = None
    """The agent the conversation goes to; ``None``: back to the previous one."""


class ListRemoteToolsInput(Contract):
    toolsets: list[ToolSource] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _old_fields(cls, data: Any) -> Any:
        """An input scheduled before toolsets (``servers``, ``apis``) as toolsets."""
        if isinstance(data, dict) and {"servers", "apis"} & data.keys():
            data = dict(data)
            data["mcp_servers"], data["openapi"] = data.pop("servers", []), data.pop("apis", [])
            data = sources_from_old_fields(data)
        return data


class ResolveToolsResult(Contract):
    tools: list[ResolvedTool]
    missing: list[str] = Field(default_factory=list)
    """Names no worker-side tool answers to."""
    available: list[str] = Field(default_factory=list)
    """The function tools of the worker that answered, so a missing name can be told
    which one was meant."""
    missing_guardrails: list[str] = Field(default_factory=list)
    missing_hooks: list[str] = Field(default_factory=list)


class TranscriptRef(Contract):
    """A transcript prefix by content: its length and its chain hash."""

    count: int = Field(ge=0)
    hash: str


class StoredMessageRef(Contract):
    """A message a tool activity already put in history and in the store, by content hash."""

    stored: str


def _message_or_reference(value: Any) -> str:
    """Which of ``MessageOrRef`` a value is: a reference has ``stored`` and no ``role``."""
    if isinstance(value, StoredMessageRef):
        return "reference"
    if isinstance(value, dict) and "stored" in value and "role" not in value:
        return "reference"
    return "message"


MessageOrRef = Annotated[
    Annotated[Message, Tag("message")] | Annotated[StoredMessageRef, Tag("reference")],
    Discriminator(_message_or_reference),
]
"""A message, or a tool result by reference. Told apart at once, not by trying each
kind of message first: a piece of 500 references was encoded four times slower than
500 whole messages, and validated seven times slower. The JSON is the same."""


class ModelSetup(Contract):
    """What stays the same across a session's model calls: sent once, cached by digest."""

    endpoint: ProviderEndpoint | str
    """As the spec gives it: a registered endpoint's name, or an inline one."""
    model: str
    options: ModelOptions
    reasoning: ReasoningWire
    stream: bool
    output_schema: dict[str, Any] | None = None
    tools: list[ToolDefinition] = Field(default_factory=list)
    context: ContextRules | None = None
    """The context budget requests are fitted to (unset: every message is sent)."""
    agent: str | None = None
    """The swarm agent the call is for: the conversation is shown as it sees it."""
    instructions: str | None = None
    """That agent's system prompt."""
    live: bool = False
    """Publish the text and reasoning deltas to the session's event log as they stream."""
    inputs: ModelInputs | None = None
    """What the model takes and how structured output is asked for (unset: the
    defaults: every part the wire carries, ``json_schema``)."""
    hooks: HookNames | None = None
    """The hooks each call and reply go through (unset: none)."""
    price: ModelPrice | None = None
    """What the model costs (its calls' cost in metrics and the timeline)."""
    calls_per_page: int | None = Field(default=None, gt=0)
    """A reply (``digested``) of more tool calls comes with only this many, the store
    keeping it whole (``digests.ModelReturn.calls``)."""

    @property
    def target(self) -> ProviderEndpoint:
        """The endpoint once the worker has resolved it (``ModelActivities``)."""
        if isinstance(self.endpoint, str):
            raise ValueError(f"model endpoint {self.endpoint!r} is a name no worker resolved")
        return self.endpoint


class ModelCallInput(Contract):
    """Lean on purpose: stored in history once per model call, for the life of the session.
    (The session id is the activity's workflow id.)"""

    turn: int
    setup_digest: str
    setup: ModelSetup | None = None
    """Sent on a session's first call, or when a worker reported the digest unknown."""
    transcript: TranscriptRef | None = None
    """The prefix workers already hold; ``None`` when ``messages`` is the whole array."""
    messages: list[MessageOrRef]
    """The messages after ``transcript``'s prefix (all of them without one); tool results
    go by reference, since their activity's result already holds them."""
    head: str
    """Chain hash of the whole array, which the worker checks before calling the model."""
    tenant: str | None = None
    """Whose call it is (the session's owner), where the workers limit endpoints: the
    limit's capacity is shared fairly between tenants."""
    waited: bool = False
    """The call waited for capacity on its endpoint's limit, which keeps capacity for it now."""
    digested: bool | None = None
    """Answer with a ``digests.ModelReturn`` (the reply with its digest and size)."""
    message_id: str | None = None
    """The stable id the reply takes in the array (``core.message_id``): set on it
    before it is digested and stored, so the message the workflow joins is the same."""
    count_left_out: bool | None = None
    """With ``digested``: say how many messages the request left out to fit the context
    budget (``ModelReturn.left_out``)."""
    asks_again: bool | None = None
    """With ``digested``: a worker that has not seen the session answers with what it
    lacks (``WorkerLacks``) instead of failing the call; set by workflow code that
    reads that answer (a worker of an earlier release does not)."""
    run_chain: str | None = None
    """The session's first run id: the same after continue-as-new, new for a session
    that reuses a workflow id. What a worker remembers for the session (files fetched by
    URL, and those refused) belongs to it; unset, to the run alone."""


class SummaryCallInput(ModelCallInput):
    """Ask a model (the setup's) for a summary of the array's first ``until`` messages
    (from the latest summary or flush on)."""

    until: int = Field(ge=1)
    prompt: str


class StoreTranscriptInput(Contract):
    """Put messages into the workers' store in budget-sized pieces (re-seeding after a
    store lost a transcript that no longer fits one payload)."""

    transcript: TranscriptRef | None = None
    messages: list[MessageOrRef]
    """Tool results their activity stored go by reference, as in a model call's input
    (``ModelCallInput.messages``): history holds them once."""
    head: str


class LoadTranscriptInput(Contract):
    """Read a stored transcript back, a budget-sized page at a time."""

    transcript: TranscriptRef
    start: int = Field(ge=0)
    max_bytes: int = Field(gt=0)
    max_messages: int | None = Field(default=None, gt=0)
    digested: bool | None = None
    """Answer with a ``digests.TranscriptPage`` (each message's digest and size too)."""
    calls_per_page: int | None = Field(default=None, gt=0)
    """A message of more tool calls ends the page, with only this many of them."""


class ToolCallInput(Contract):
    """One call; the session id is the activity's workflow id."""

    turn: int
    slot: int
    tool_name: str
    tool_call_id: str
    arguments: str
    bound: dict[str, Any] = Field(default_factory=dict)
    approval: ApprovalRecord | None = None
    """How the call was approved, kept on its result (which is final as the activity
    returns it, so history holds it once)."""
    max_result_chars: int = 100_000
    attempt: int = Field(default=1, ge=1)
    """The tool's own attempt: 1 + the times it raised before (lost workers not counted)."""
    secrets: list[str] = Field(default_factory=list)
    """Secret names the call may resolve (set only when it references one)."""
    target: RecordedCall | None = None
    """What the call needs besides its arguments, by its tool's kind (``None``: a
    function the worker loaded)."""
    agent_name: str | None = None
    """The swarm agent whose call this is, recorded on the result."""
    digested: bool | None = None
    """Answer with a ``digests.ToolReturn`` (the result with its digest and size)."""
    message_id: str | None = None
    """The stable id the result takes in the array, as ``ModelCallInput.message_id``."""
    run: str | None = None
    """An agent run inside another workflow: which one (its calls' session id is the
    workflow's id and this)."""

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        return legacy_tool_call(data)


class SendResult(Contract):
    """The ``send_message`` update's answer: the message is queued for the next turn."""

    before: int
    """Messages in the array before it (``wait(after=before)`` follows its answer)."""
    queued: int
    """Messages waiting for the turn boundary (this one included, from the update)."""
    problem: str | None = None
    """Why the message would be refused (the ``message_check`` query)."""


class EndSessionSignal(Contract):
    by: str | None = None
    reason: str | None = None


class CancelTurnSignal(Contract):
    """Stop the current turn, keep the session (``cancel_turn``)."""

    by: str | None = None
    reason: str | None = None


class MoveToAgentSignal(Contract):
    """Move a swarm session to another agent (``move_to_agent``): at the next checkpoint,
    as a handoff would (the agent it leaves is pushed on the navigation stack)."""

    agent: str
    by: str | None = None
    reason: str | None = None


class FlushSignal(Contract):
    """Reset what later requests start from (``flush``): a marker joins the array once
    the current turn is over."""

    by: str | None = None
    reason: str | None = None


class BudgetSignal(Contract):
    """Change the session's budget (``set_budget``); ``None`` keeps a limit as it is."""

    max_total_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    by: str | None = None
    """Who asks (a raise is decided by the session's approvers, as a decision is)."""


class BudgetStatus(Contract):
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    total_tokens: int = 0
    cost_usd: float | None = None
    """Spent so far, by the model's ``price`` (``None`` without one)."""


GuardrailKind = Literal["input", "output"]
"""What a guardrail checks: a person's message before it joins, or a final answer."""


class GuardrailInput(Contract):
    """Run these guardrails, in order, on one text (a user message or a final answer)."""

    kind: GuardrailKind
    names: list[str]
    text: str


class GuardrailVerdict(Contract):
    allowed: bool
    reason: str | None = None
    by: str | None = None
    """The guardrail that denied."""


Phase = Literal[
    "starting",
    "checking_guardrails",
    "compacting",
    "calling_model",
    "awaiting_approval",
    "running_tools",
    "idle",
    "done",
    "failed",
]
#: What the session does next: call the model, run the open tool batch, or wait for a person.
Stage = Literal["model", "tools", "idle"]


class SessionStatus(Contract):
    phase: Phase
    wake_ups: list[WakeUp] = Field(default_factory=list)
    """The wake-ups the session holds, in the order they were set."""
    grants: list[Grant] = Field(default_factory=list)
    """Standing "always" approvals (revocable with ``revoke_grant``)."""
    turn: int
    message_count: int
    pending_approvals: list[PendingApproval]
    """The calls that wait: the first 1,000 of ``pending_count`` (an answer fits 2 MB)."""
    pending_count: int = 0
    usage: Usage
    spend: dict[str, ModelSpend] = Field(default_factory=dict)
    """What each model spent (calls, tokens, cost), and each tool's sub-agents."""
    last_error: str | None = None
    rejected_signals: list[str] = Field(default_factory=list)
    """Signals that changed nothing (unknown or already-decided approval ids, empty or
    oversized messages), newest last."""
    queued_messages: int = 0
    """User messages received but not yet delivered (they wait for the turn boundary)."""
    runs: int = 1
    """Runs of this session (1 + continue-as-new cycles)."""
    cancel_pending: bool = False
    """A ``cancel_turn`` waits for the next checkpoint."""
    flushes_pending: int = 0
    """``flush`` requests waiting for the current turn to end."""
    compacted: int = 0
    """Messages at the array's start that requests no longer include (a flush or a
    compaction summary stands in for them; they stay in the array)."""
    budget: BudgetStatus | None = None
    trimmed: int = 0
    """Messages the latest model request left out to fit ``model.context.budget_tokens``
    (trimming; they stay in the array)."""
    files_left_out: list[str] = Field(default_factory=list)
    """What the latest model request told the model of each file or image it left out
    (the owner's file limits or rules), counted where several were told the same; the
    message keeps the part as it was sent."""
    agent: str | None = None
    """A swarm's active agent (unset in one-agent sessions)."""
    agent_stack: list[str] = Field(default_factory=list)
    """The agents ``transfer_back`` returns to, the most recent last."""
    agents: list[str] = Field(default_factory=list)
    """The swarm's agents."""
    move_pending: str | None = None
    """An agent a person moved the session to, waiting for the turn's checkpoint."""
    finish_reason: str | None = None
    """How the model's latest turn ended, as the provider said (``stop``, ``tool_calls``,
    ``length``, ``content_filter``): a cut answer shows here (``stop.on_truncated``)."""
    waiting_for_capacity: str | None = None
    """The limited endpoint (or ``ENDPOINT/MODEL``) whose shared limit the model call
    waits for capacity on."""
    version: str | None = None
    """The worker build running the session (``DEPLOYMENT:BUILD_ID``; unset: unversioned)."""
    upgrade: Literal["auto", "pinned"] = "auto"
    """``session.upgrade``: whether the session goes to a newly current build on its own."""
    move_requested: bool = False
    """A person asked the session to go to the current build at its next turn boundary."""


class ModelSpend(Contract):
    """What one model (or one tool's models: a sub-agent) spent in a session."""

    calls: int = 0
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float | None = None
    """By the price the spec gives that model (unset: no price)."""


class AgentResult(Contract):
    """How a session ended. ``stop_reason``: ``final_answer`` (one-shot sessions),
    ``stop_tool:<name>``, ``ended``, ``idle_timeout``, ``budget``, ``max_turns`` and
    ``error`` (where ``stop.end_session_on`` names them), or for a one-shot session
    whose turn did not end in an answer, ``guardrail``, ``cancelled``,
    ``unusable_reply``, ``truncated``, ``compaction_failed``, ``max_turns`` or
    ``error``."""

    status: Literal["done", "failed"]
    stop_reason: str
    final: AssistantMessage | ToolMessage | None = None
    structured_output: Any = None
    """The answer parsed against the spec's ``output_schema``; when it does not parse or
    match (and rescue did not mend it), the raw text, with ``error`` saying why."""
    error: str | None = None
    turns: int
    message_count: int
    usage: Usage
    spend: dict[str, ModelSpend] = Field(default_factory=dict)
    """By model (a fallback's apart), and by tool for what sub-agents spent."""
    events_offset: int | None = None
    """The offset after the run's last live event (a resumed run's events go on there)."""


class AgentRunError(DurableAgentError, RuntimeError):
    """The session ended without a usable answer; ``result`` says how it ended (the
    raw answer stays in the session's messages). Raised in a workflow that runs an
    agent, it fails that workflow (``DurableAgentPlugin`` declares it so)."""

    def __init__(self, session_id: str, result: AgentResult) -> None:
        why = result.error or result.stop_reason
        super().__init__(
            f"session {session_id} ended {result.status} ({result.stop_reason}): {why}"
        )
        self.session_id = session_id
        self.result = result


class ClosedRunInput(Contract):
    """An ended run of the calling session, whose conversation a new run goes on with."""

    run_id: str
    chain: Literal[2] | None = None
    """The chain the reference is made in (``transcript.hash_version``; ``None``: the first)."""


class ForkInput(Contract):
    """The start of another session's conversation, for a session that branches from it;
    ``instructions``: the branch's own (they replace its first system message)."""

    fork: Fork
    instructions: str | None = None
    chain: Literal[2] | None = None
    """As ``ClosedRunInput.chain``."""


#: The signal sent with a session's start carrying a long history apart from the input
#: (``AgentInput.earlier``): a worker reads it from the run's history; the workflow's
#: handler never decodes it.
EARLIER_HISTORY_SIGNAL = "earlier_history"


class StartedHistoryInput(Contract):
    """The messages a session was started with apart from its input (``AgentInput.
    earlier``): how many, and the system message that goes first (none without
    instructions)."""

    count: int = Field(ge=1)
    first: SystemMessage | None = None
    chain: Literal[2] | None = None
    """As ``ClosedRunInput.chain``."""


class AdmissionInput(Contract):
    """A session's spec, checked against the worker's registries when a run starts."""

    spec: AgentSpec
    carried: bool = False
    """The run's input carries state from a previous run: the worker checks with the
    server that this run is a continue-as-new of the session's own workflow."""


class ToolRoutesInput(Contract):
    """Task queues a batch's calls are recorded to go to, asked of the session's worker
    before any of them is sent."""

    queues: list[str]


class ToolRoutes(Contract):
    """The queues of ``ToolRoutesInput`` the worker's owner does not route tool calls
    to, and why."""

    refused: dict[str, str] = Field(default_factory=dict)


class Admission(Contract):
    refused: list[str] = Field(default_factory=list)
    """What the spec names or carries that the worker does not let it use."""
    payload_store_bytes: int | None = None
    """The worker keeps payloads from this size on in its payload store (history holds
    a reference), so one message over the payload budget can still travel alone."""
    message_log: bool = False
    """The worker feeds a message log: the session stores its array's tail before it
    waits or ends, so every message reaches the log."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """The worker's prices of the models the spec names without one."""
    limited: bool = False
    """The worker limits some endpoints: model calls say whose they are (``tenant``)."""


# What a worker tells the workflow of the messages it hands over: each one's content
# hash and size in a payload. In the transcript's version-2 hash chain (``transcript``) the
# workflow then joins them to the array without encoding or hashing them itself, so a
# 20 MB tool result costs its task the decoding and nothing more.

AnyMessage = TypeVar("AnyMessage", bound=Message)

#: What one message's digest and size add to a page in a payload (a 32-character hash,
#: a number, their quotes and commas), counted against the page's budget.
DIGEST_BYTES = 48


class _Digested(Contract):
    """A message with what its worker worked out of it."""

    digest: str
    """``transcript.content_hash`` of ``message`` (a tool result's: the key its activity
    stored it by)."""
    size: int = Field(ge=0)
    """``transcript.payload_bytes`` of ``message``."""


class ToolReturn(_Digested):
    """``run_tool``'s result when the call asks for it (``ToolCallInput.digested``)."""

    message: ToolMessage


class ModelReturn(_Digested):
    """``call_model``'s result when the call asks for it (``ModelCallInput.digested``):
    a reply of thousands of calls or a long answer joins the array without the
    workflow encoding it."""

    message: AssistantMessage
    calls: int | None = None
    """The reply's number of tool calls, when ``message`` holds only the first of them
    (``ModelSetup.calls_per_page``): the rest are read with ``reply_calls``."""
    arguments_checked: bool | None = None
    """With ``calls``: every tool call's arguments are a JSON object (``arguments_problem``
    found none), so the workflow does not parse thousands of them again."""
    left_out: int | None = None
    """Messages the request left out to fit the context budget, when the call asked
    (``ModelCallInput.count_left_out``; unset: none)."""
    files_left_out: list[str] | None = None
    """What the request's markers said of each file or image it left out (the owner's
    limits or rules), counted where several said the same; unset: none."""


#: What a worker new to a session may lack of what a model call refers to.
Lack = Literal["setup", "transcript"]


class WorkerLacks(Contract):
    """``call_model``'s answer from a worker that has not seen the session (a fresh
    worker after a deploy or a crash, its store its own) when the call asks for it
    (``ModelCallInput.asks_again``): what the workflow sends again, the model setup,
    the whole transcript or both. A move between workers is no failure: no attempt is
    used, and nothing is logged as one."""

    lacks: list[Lack] = Field(min_length=1)


class TranscriptPage(Contract):
    """``load_transcript``'s result when the page asks for it
    (``LoadTranscriptInput.digested``): the messages, and each one's digest and size."""

    messages: list[Message]
    digests: list[str]
    sizes: list[int]
    calls: int | None = None
    """The last message's number of tool calls, when it holds only the first of them
    (``LoadTranscriptInput.calls_per_page``): the rest are read with ``reply_calls``."""

    @model_validator(mode="after")
    def _one_each(self) -> TranscriptPage:
        if not len(self.messages) == len(self.digests) == len(self.sizes):
            raise ValueError("a page needs one digest and one size per message")
        return self


class ReplyCallsInput(Contract):
    """Read tool calls ``start`` to ``stop`` of a message the workers' store keeps by its
    content hash (a model's reply or a page read back, cut to its first calls)."""

    key: str
    start: int = Field(ge=0)
    stop: int = Field(gt=0)


def arguments_problem(arguments: str) -> str | None:
    """What keeps a call's raw arguments from being a tool's input (empty ones are read
    as ``{}``), said as the end of a sentence; ``None``: nothing."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return "are not valid JSON"
    return None if isinstance(parsed, dict) else "are not a JSON object"


def arguments_checked(message: AssistantMessage) -> bool | None:
    """``True`` when the message has tool calls and ``arguments_problem`` finds nothing
    in any of them (``None`` otherwise: the workflow looks for itself)."""
    calls = message.tool_calls
    if not calls or any(arguments_problem(c.function.arguments) for c in calls):
        return None
    return True


def first_calls(message: AnyMessage, most: int | None) -> tuple[AnyMessage, int | None]:
    """``message`` with at most ``most`` of its tool calls, and how many it has when it
    was cut (``None``: it is whole)."""
    calls = message.tool_calls if isinstance(message, AssistantMessage) else None
    if most is None or calls is None or len(calls) <= most:
        return message, None
    cut = message.model_copy(update={"tool_calls": calls[:most]})
    return cast(AnyMessage, cut), len(calls)  # (a copy is of its original's type)


def with_calls(message: AssistantMessage, calls: list[ToolCall]) -> AssistantMessage:
    """``message`` with ``calls`` for its tool calls (nothing validated or encoded)."""
    return message.model_copy(update={"tool_calls": calls})


def digested(message: Message, encoded: str | None = None) -> tuple[str, int]:
    """A message's content hash and payload size (``encoded``: its canonical JSON, when
    the caller has it, so it is not encoded again)."""
    digest = json_digest(encoded) if encoded is not None else content_hash(message)
    return digest, payload_bytes(message)
