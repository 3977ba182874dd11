"""The session's live event log (temporalio's contrib workflow streams): what the loop
did, published as it happens, for ``SessionHandle.follow`` and the gateway to read.

Publishing from the workflow only appends to the stream's in-memory log (no command, no
history event), so it is replay-safe and free. The model activity adds the text deltas
by signal. The log is bounded (older events are dropped; the ``messages`` query keeps
every message) and carried across continue-as-new, so offsets only grow.

The loop's own steps (a rescue, a flush, a compaction, a guardrail's block) are read
off the array as live events here too (``step_events``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.workflow_streams import (
    WorkflowStream,
    WorkflowStreamItem,
    WorkflowStreamState,
)

from durable_agent._contracts.events import (
    TOOL_RESULT_EVENT_CHARS,
    Compacted,
    Flushed,
    GuardrailBlocked,
    HostedToolUsed,
    Rescued,
)
from durable_agent._wire.context import COMPACTION
from durable_agent._wire.messages import (
    AssistantMessage,
    FlushMessage,
    Message,
    ResqueMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    hosted_calls,
)

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.boundary import AgentResult
    from durable_agent._contracts.events import (
        EVENTS_TOPIC,
        MESSAGE_EVENT_MAX_BYTES,
        AgentChanged,
        ApprovalDecided,
        ApprovalRequested,
        CapacityGranted,
        CapacityWait,
        Ended,
        ErrorReported,
        Idle,
        MessageAppended,
        ModelStarted,
        ToolFinished,
        ToolStarted,
        Trimmed,
        TurnEnded,
        TurnStarted,
        UsageReported,
    )
    from durable_agent._session import PAGE_BREAK, Session, ToolRun, epoch_ms
    from durable_agent._session.protocol import DecisionsTold
    from durable_agent._wire.messages import AssistantMessage, ToolMessage

    from .telemetry import SessionMetrics


# The loop's own steps as live events, read off what they leave in the array: a rescue
# leaves a ``resque`` message, a flush its marker, a compaction its summary, a guardrail a
# ``blocked`` message. Pure, so the workflow derives them where it announces messages.

def step_events(message: Message) -> list[Any]:
    """What the loop did that this appended message records (usually nothing)."""
    if isinstance(message, ResqueMessage):
        return [Rescued(strategy=message.strategy, attempt=message.attempt, reason=message.reason)]
    if isinstance(message, FlushMessage):
        return [Flushed(by=message.by, reason=message.reason)]
    if isinstance(message, SystemMessage) and message.source == COMPACTION:
        return [Compacted(compacts=message.compacts)]
    if isinstance(message, UserMessage | AssistantMessage) and message.blocked is not None:
        kind = "input" if isinstance(message, UserMessage) else "output"
        return [GuardrailBlocked(kind=kind, reason=message.blocked)]
    if isinstance(message, AssistantMessage) and message.provider_items is not None:
        # the provider ran these within the reply: shown, never run or gated here
        return [HostedToolUsed(**c.model_dump()) for c in hosted_calls(message.provider_items)]
    return []


def result_text(result: ToolMessage) -> str:
    """A tool result's text as a ``tool_finished`` event carries it (bounded)."""
    text = result.content
    if len(text) <= TOOL_RESULT_EVENT_CHARS:
        return text
    return text[:TOOL_RESULT_EVENT_CHARS] + f"... [{len(text)} characters]"


#: The log a run keeps (wire bytes): past it, the oldest events go at the next trim.
LOG_MAX_BYTES = 1_000_000
#: Turns between two looks at the log's size (a look sizes events until the log is over
#: ``LOG_MAX_BYTES``), after the first turn of a run...
TRIM_EVERY_TURNS = 10
#: ...and events the loop publishes between two looks within a turn (a turn of thousands
#: of tool calls logs two events a call): what a cut frees at once stays bounded.
TRIM_EVERY_EVENTS = 1_000
#: What continue-as-new carries of the log (the rest of the state needs the capacity): at
#: most this, and a tenth of the session's payload budget.
CARRIED_LOG_BYTES = 200_000
#: Messages one look announces one by one; a step that adds more (a session started
#: with a long history) announces the newest (the ``messages`` query has them all).
MESSAGES_PER_LOOK = 200


def event_payload(event: BaseModel) -> Payload:
    """An event as the log holds it: the JSON its readers decode (``read_event``), made
    in one step where the stream's converter would take a dict of it, in two."""
    return Payload(metadata={"encoding": b"json/plain"}, data=to_json(event, exclude={"offset"}))


class LiveFeed:
    def __init__(self, stream: WorkflowStream, session: Session) -> None:
        self._stream = stream
        self._topic = stream.topic(EVENTS_TOPIC)
        self._session = session
        self._shown = 0
        self._asked: set[str] = set()
        self._told: set[str] = set()
        self._idle = False
        self._turn = -1
        self._trimmed_at: int | None = None
        self._tool_started: dict[int, int] = {}
        self._turn_told: tuple[int, str] | None = None
        self._agent = session.view.model.agent_name
        self._trimmed = 0
        self._published = 0
        self._sizes = EventSizes()
        self._handed_over: list[WorkflowStreamItem[Payload]] = []
        self.metrics = SessionMetrics()

    def resume(self) -> None:
        """A continued run: what the previous run carried was announced by it."""
        session = self._session
        self._shown = len(session.messages)
        self._asked = {p.approval_id for p in session.view.approvals.asked()}
        self._told = set(session.view.approvals.decided()) & self._asked
        self._turn = session.view.loop.turn

    def _publish(self, event: Any) -> None:
        self._topic.publish(event_payload(event))
        self._sizes.published(self._stream)
        self._published += 1
        if self._published % TRIM_EVERY_EVENTS == 0:
            self._trim()

    # --- what the loop observes --------------------------------------------------------

    def observe(self, everything: bool = False) -> bool:
        """Announce what changed in the session since the last look: new messages,
        approvals asked and decided, the session going idle. Approvals are announced at
        most a page of each a look (``everything``: all, at the end); whether every
        one was (``caught_up`` looks again a task later until then)."""
        session = self._session
        messages = session.messages
        self._shown = max(min(self._shown, len(messages)), len(messages) - MESSAGES_PER_LOOK)
        for index in range(self._shown, len(messages)):
            message = messages[index]
            small = messages.size_of(index) <= MESSAGE_EVENT_MAX_BYTES
            body = message if small else None
            self._publish(MessageAppended(index=index, message=body, run=session.view.loop.runs))
            for step in step_events(message):
                self._publish(step)
        self._shown = len(messages)
        self._loop_state()
        told = self._asked_now(everything) & self._decided_now(everything)
        self.metrics.phase(session.view.loop.phase)
        idle = session.view.loop.phase == "idle"
        if idle and not self._idle:
            self._publish(Idle(message_count=len(messages)))
        self._idle = idle
        return told

    async def caught_up(self) -> None:
        """``observe``, and again a task later while approvals are left to announce (a
        batch of thousands: each task announces a page of them)."""
        while not self.observe():
            await workflow.sleep(PAGE_BREAK)

    def _asked_now(self, everything: bool) -> bool:
        """Announce the approvals asked since the last look (a page of them); whether
        all were. They are the end of the list: approvals are only ever added there."""
        pending = self._session.view.approvals.asked()
        first = len(pending)
        while first > 0 and pending[first - 1].approval_id not in self._asked:
            first -= 1
        new = pending[first:]
        capacity = len(new) if everything else self._session.view.approvals.page_for(len(new))
        asked = new[:capacity]
        for approval in asked:
            self._asked.add(approval.approval_id)
            self._publish(ApprovalRequested(approval=approval))
        self.metrics.approvals_requested(asked)
        return capacity == len(new)

    def _decided_now(self, everything: bool) -> bool:
        """Announce the decisions on announced approvals since the last look (a page of
        them); whether all were. A decision on an approval not announced yet waits."""
        session = self._session
        decisions, queue = session.view.approvals.decided(), session.view.approvals.newly_decided()
        known = [aid for aid in dict.fromkeys(queue) if aid in decisions and aid not in self._told]
        ready = [aid for aid in known if aid in self._asked]
        capacity = len(ready) if everything else session.view.approvals.page_for(len(ready))
        decided = [(aid, decisions[aid]) for aid in ready[:capacity]]
        for aid, record in decided:
            self._told.add(aid)
            self._publish(ApprovalDecided(approval_id=aid, record=record))
        session.handle(
            DecisionsTold([aid for aid in known if aid not in self._told]), workflow.now()
        )
        if decided:
            by_id = session.view.approvals.by_id()
            self.metrics.approvals_decided([(by_id.get(aid), record) for aid, record in decided])
        return capacity == len(ready)

    def _loop_state(self) -> None:
        """A turn that ended without an answer, another agent answering, a request
        trimmed: each announced once, when first seen."""
        session = self._session
        failed = session.view.loop.turn_failure
        if failed is not None and (session.view.loop.turn, failed) != self._turn_told:
            self._turn_told = (session.view.loop.turn, failed)
            self._publish(
                TurnEnded(
                    turn=session.view.loop.turn, reason=session.view.loop.reply_reason, error=failed
                )
            )
        if session.view.model.agent_name != self._agent:
            self._publish(AgentChanged(agent=session.view.model.agent_name, previous=self._agent))
            self._agent = session.view.model.agent_name
        if session.view.loop.trimmed != self._trimmed and session.view.loop.trimmed:
            self._publish(Trimmed(count=session.view.loop.trimmed))
        self._trimmed = session.view.loop.trimmed

    def model_call(self, turn: int) -> None:
        session = self._session
        if turn != self._turn:
            self._turn = turn
            if self._trimmed_at is None or turn - self._trimmed_at >= TRIM_EVERY_TURNS:
                self._trimmed_at = turn
                self._trim()
            self._publish(TurnStarted(turn=turn))
        self._publish(
            ModelStarted(
                turn=turn, agent=session.view.model.agent_name, model=session.view.model.spec.name
            )
        )

    def model_replied(self, turn: int, reply: AssistantMessage) -> None:
        self.observe()  # the reply (or what stands in for it) first
        if reply.usage is not None:
            self._publish(
                UsageReported(turn=turn, usage=reply.usage, total=self._session.view.loop.usage)
            )

    def model_failed(self, turn: int, kind: str | None, text: str) -> None:
        self._publish(ErrorReported(turn=turn, text=text, kind=kind))

    def capacity(self, turn: int, endpoint: str, waiting: bool) -> None:
        """A model call waits for capacity on a limited endpoint, or got it."""
        kind = CapacityWait if waiting else CapacityGranted
        self._publish(kind(turn=turn, endpoint=endpoint))

    def tool_started(self, turn: int, run: ToolRun) -> None:
        self._tool_started[run.slot] = epoch_ms(workflow.now())
        call = run.call
        self._publish(
            ToolStarted(turn=turn, slot=run.slot, call_id=call.id, name=call.function.name)
        )

    def tool_finished(self, turn: int, run: ToolRun, result: ToolMessage) -> None:
        began = self._tool_started.pop(run.slot, epoch_ms(workflow.now()))
        call = run.call
        self._publish(
            ToolFinished(
                turn=turn,
                slot=run.slot,
                call_id=call.id,
                name=call.function.name,
                duration_ms=epoch_ms(workflow.now()) - began,
                error=bool(result.is_error),
                result=result_text(result),
            )
        )

    def ended(self, result: AgentResult | None, error: str | None = None) -> int:
        """Announce the end; the offset after it (a resumed run's events go on there)."""
        self.observe(everything=True)
        self._publish(Ended(result=result, error=error))
        self.let_go()  # long-polling readers drain the closed run by query
        base, items = logged(self._stream)
        return base + len(items)

    # --- the log's size, and continue-as-new ---------------------------------------------

    def let_go(self) -> None:
        """Release long-polling readers (they follow the session to its next run), so
        every handler can finish before continue-as-new."""
        self._stream.detach_pollers()

    def state_for_next_run(self) -> WorkflowStreamState:
        """The newest events within ``CARRIED_LOG_BYTES``; offsets go on from there. The
        log is cut to them first, so only what is carried is encoded (a turn of thousands
        of tool calls logs thousands of events; a hand-over that is deferred keeps only
        these too)."""
        self.metrics.handed_over()
        capacity = min(CARRIED_LOG_BYTES, self._session.spec.session.payload_budget_bytes // 10)
        whole = logged(self._stream)[1]
        keep_newest(self._stream, capacity, self._sizes)
        if logged(self._stream)[1] is not whole:
            # the events cut are freed with this run, not in the task that continues as
            # new (freeing thousands took milliseconds there); a deferred hand-over's
            # next cut lets this one go
            self._handed_over = whole
        return self._stream.get_state()

    def _trim(self) -> None:
        if log_over(self._stream, LOG_MAX_BYTES, self._sizes):
            keep_newest(self._stream, LOG_MAX_BYTES // 2, self._sizes)


class EventSizes:
    """Each logged event's wire size, worked out in the task that published it: a look
    at the log's size then adds numbers instead of sizing a thousand events in one task
    (events the stream took by signal, the model's text deltas, are sized when first
    looked at). Kept by offset from the log's first; offsets only grow."""

    def __init__(self) -> None:
        self._first = 0
        self._sizes: list[int | None] = []

    def published(self, stream: WorkflowStream) -> None:
        """The newest event was just published."""
        base, items = logged(stream)
        if base == self._first and len(items) == len(self._sizes) + 1:
            self._sizes.append(wire_size(items[-1]))
        else:  # the log was cut, or took events by signal, since
            self.aligned(stream)
            self._sizes[-1] = wire_size(items[-1])

    def aligned(self, stream: WorkflowStream) -> tuple[int, list[WorkflowStreamItem[Payload]]]:
        """``logged(stream)``, with a slot for each of its events (what was cut, gone)."""
        base, items = logged(stream)
        if not self._first <= base <= self._first + len(self._sizes):
            self._first, self._sizes = base, []
        del self._sizes[: base - self._first]
        self._first = base
        del self._sizes[len(items) :]
        self._sizes.extend([None] * (len(items) - len(self._sizes)))
        return base, items

    def at(self, index: int, item: WorkflowStreamItem[Payload]) -> int:
        """The size of the log's ``index``-th event (call ``aligned`` first)."""
        size = self._sizes[index]
        if size is None:
            size = self._sizes[index] = wire_size(item)
        return size


def keep_newest(stream: WorkflowStream, max_bytes: int, sizes: EventSizes | None = None) -> None:
    """Drop the oldest events of the log past ``max_bytes`` of wire size (only the
    newest, the ones kept, are sized; ``sizes``: those known already)."""
    base, items = logged(stream) if sizes is None else sizes.aligned(stream)
    total, keep = 0, 0
    for index in range(len(items) - 1, -1, -1):
        item = items[index]
        total += wire_size(item) if sizes is None else sizes.at(index, item)
        if total > max_bytes:
            break
        keep += 1
    if keep < len(items):
        stream.truncate(base + len(items) - keep)


def log_over(stream: WorkflowStream, max_bytes: int, sizes: EventSizes | None = None) -> bool:
    """The log is over ``max_bytes`` of wire size (sized until it is)."""
    items = logged(stream)[1] if sizes is None else sizes.aligned(stream)[1]
    total = 0
    for index, item in enumerate(items):
        total += wire_size(item) if sizes is None else sizes.at(index, item)
        if total > max_bytes:
            return True
    return False


def logged(stream: WorkflowStream) -> tuple[int, list[WorkflowStreamItem[Payload]]]:
    """The log's first offset and its events, read without encoding them:
    ``get_state`` encodes every event, so a look at the log's size would grow with it.
    Reads the stream's private log (temporalio's contrib has no public view of it);
    ``tests/temporal/test_live_log_sizes.py`` checks what is read against ``get_state``."""
    return stream._base_offset, stream._log


def wire_size(item: WorkflowStreamItem[Payload]) -> int:
    """An event's size as ``get_state`` writes it: its topic, and base64 of its
    payload's bytes (whole groups of four characters)."""
    return len(item.topic) + 4 * ((item.data.ByteSize() + 2) // 3)
