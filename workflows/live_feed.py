"""The session's live event log (temporalio's contrib workflow streams): what the loop
did, published as it happens, for ``AgentClient.follow`` and the gateway to read.

Publishing from the workflow only appends to the stream's in-memory log (no command, no
history event), so it is replay-safe and free. The model activity adds the text deltas
by signal. The log is bounded (older events are dropped; the ``messages`` query keeps
every message) and carried across continue-as-new, so offsets only grow.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

with workflow.unsafe.imports_passed_through():
    from durable_agent.contracts import AgentResult
    from durable_agent.events import (
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
        event_payload,
    )
    from durable_agent.loop_events import result_text, step_events
    from durable_agent.messages import AssistantMessage, ToolMessage
    from durable_agent.workflows.session.commands import ToolRun
    from durable_agent.workflows.session.core import Session
    from durable_agent.workflows.session.loop_rules import epoch_ms
    from durable_agent.workflows.session_metrics import SessionMetrics

#: The log a run keeps (wire bytes): past it, the oldest events go at the next trim.
LOG_MAX_BYTES = 1_000_000
#: Turns between two looks at the log's size (a look encodes the whole log), after the
#: first turn of a run.
TRIM_EVERY_TURNS = 10
#: What continue-as-new carries of the log (the rest of the state needs the room): at
#: most this, and a tenth of the session's payload budget.
CARRIED_LOG_BYTES = 200_000
#: Messages one look announces one by one; a step that adds more (a session started
#: with a long history) announces the newest (the ``messages`` query has them all).
MESSAGES_PER_LOOK = 200


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
        self._agent = session.agent_name
        self._trimmed = 0
        self.metrics = SessionMetrics()

    def resume(self) -> None:
        """A continued run: what the previous run carried was announced by it."""
        state = self._session.state
        self._shown = len(self._session.messages)
        self._asked = {p.approval_id for p in state.pending}
        self._told = set(state.decisions) & self._asked
        self._turn = state.turn

    def _publish(self, event: Any) -> None:
        self._topic.publish(event_payload(event))

    # --- what the loop observes --------------------------------------------------------

    def observe(self) -> None:
        """Announce what changed in the session since the last look: new messages,
        approvals asked and decided, the session going idle."""
        session, state = self._session, self._session.state
        messages = session.messages
        self._shown = max(min(self._shown, len(messages)), len(messages) - MESSAGES_PER_LOOK)
        for index in range(self._shown, len(messages)):
            message = messages[index]
            small = messages.size_of(index) <= MESSAGE_EVENT_MAX_BYTES
            body = message if small else None
            self._publish(MessageAppended(index=index, message=body, run=state.runs))
            for step in step_events(message):
                self._publish(step)
        self._shown = len(messages)
        self._loop_state()
        for pending in state.pending:
            if pending.approval_id not in self._asked:
                self._asked.add(pending.approval_id)
                self._publish(ApprovalRequested(approval=pending))
                self.metrics.approval_requested(pending)
        for aid, record in state.decisions.items():
            if aid in self._asked and aid not in self._told:
                self._told.add(aid)
                self._publish(ApprovalDecided(approval_id=aid, record=record))
                asked = next((p for p in state.pending if p.approval_id == aid), None)
                self.metrics.approval_decided(asked, record)
        self.metrics.phase(session.phase)
        idle = session.phase == "idle"
        if idle and not self._idle:
            self._publish(Idle(message_count=len(messages)))
        self._idle = idle

    def _loop_state(self) -> None:
        """A turn that ended without an answer, another agent answering, a request
        trimmed: each announced once, when first seen."""
        session = self._session
        failed = session.turn_failed
        if failed is not None and (session.state.turn, failed) != self._turn_told:
            self._turn_told = (session.state.turn, failed)
            self._publish(
                TurnEnded(turn=session.state.turn, reason=session.reply_reason, error=failed)
            )
        if session.agent_name != self._agent:
            self._publish(AgentChanged(agent=session.agent_name, previous=self._agent))
            self._agent = session.agent_name
        if session.trimmed != self._trimmed and session.trimmed:
            self._publish(Trimmed(count=session.trimmed))
        self._trimmed = session.trimmed

    def model_call(self, turn: int) -> None:
        session = self._session
        if turn != self._turn:
            self._turn = turn
            if self._trimmed_at is None or turn - self._trimmed_at >= TRIM_EVERY_TURNS:
                self._trimmed_at = turn
                self._trim()
            self._publish(TurnStarted(turn=turn))
        self._publish(
            ModelStarted(turn=turn, agent=session.agent_name, model=session.model_spec.name)
        )

    def model_replied(self, turn: int, reply: AssistantMessage) -> None:
        self.observe()  # the reply (or what stands in for it) first
        if reply.usage is not None:
            self._publish(
                UsageReported(turn=turn, usage=reply.usage, total=self._session.state.usage)
            )

    def model_failed(self, turn: int, kind: str | None, text: str) -> None:
        self._publish(ErrorReported(turn=turn, text=text, kind=kind))

    def capacity(self, turn: int, endpoint: str, waiting: bool) -> None:
        """A model call waits for room on a limited endpoint, or got it."""
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
        self.observe()
        self._publish(Ended(result=result, error=error))
        self.let_go()  # long-polling readers drain the closed run by query
        state = self._stream.get_state()
        return state.base_offset + len(state.log)

    # --- the log's size, and continue-as-new ---------------------------------------------

    def let_go(self) -> None:
        """Release long-polling readers (they follow the session to its next run), so
        every handler can finish before continue-as-new."""
        self._stream.detach_pollers()

    def state_for_next_run(self) -> WorkflowStreamState:
        """The newest events within ``CARRIED_LOG_BYTES``; offsets go on from there."""
        self.metrics.handed_over()
        room = min(CARRIED_LOG_BYTES, self._session.spec.session.payload_budget_bytes // 10)
        return _keep_newest(self._stream.get_state(), room)

    def _trim(self) -> None:
        state = self._stream.get_state()
        if _log_bytes(state) > LOG_MAX_BYTES:
            kept = _keep_newest(state, LOG_MAX_BYTES // 2)
            self._stream.truncate(kept.base_offset)


def _log_bytes(state: WorkflowStreamState) -> int:
    return sum(len(item.data) + len(item.topic) for item in state.log)


def _keep_newest(state: WorkflowStreamState, max_bytes: int) -> WorkflowStreamState:
    size, keep = 0, 0
    for item in reversed(state.log):
        size += len(item.data) + len(item.topic)
        if size > max_bytes:
            break
        keep += 1
    dropped = len(state.log) - keep
    return replace(state, log=state.log[dropped:], base_offset=state.base_offset + dropped)
