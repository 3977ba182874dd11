"""A session's live events in the AG-UI encoding (the ``ag-ui-protocol`` package), so
existing AG-UI front ends can follow a session: a run per answered message, text as
``TEXT_MESSAGE_*``, tool calls as ``TOOL_CALL_*``, approvals, usage and restarts as
``CUSTOM`` events (AG-UI has no words for them)."""

from __future__ import annotations

from collections.abc import Iterator

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

from durable_agent.events import (
    AttemptRestarted,
    Ended,
    Idle,
    LiveEvent,
    MessageAppended,
    ModelStarted,
    ReasoningDelta,
    TextDelta,
    ToolFinished,
    ToolStarted,
)
from durable_agent.messages import AssistantMessage, ToolMessage

_encoder = EventEncoder()


def encode(event: BaseEvent) -> str:
    return _encoder.encode(event)


class AguiTranslator:
    """Stateful: which run, text message and reasoning message are open."""

    def __init__(self, thread_id: str, run_id: str | None = None) -> None:
        self.thread_id = thread_id
        self._fixed_run = run_id
        self.run_id: str | None = None
        self._text: str | None = None
        self._reasoning: str | None = None

    def open_run(self, from_offset: int | None = None) -> RunStartedEvent:
        """A run starts: the one the caller named, else one named by where it starts."""
        self.run_id = self._fixed_run or f"{self.thread_id}-{from_offset}"
        return RunStartedEvent(threadId=self.thread_id, runId=self.run_id)

    def translate(self, event: LiveEvent) -> Iterator[BaseEvent]:
        if self.run_id is None and not isinstance(event, Ended | Idle):
            yield self.open_run(event.offset)
        if isinstance(event, ModelStarted):
            yield from self._close_open()
        elif isinstance(event, TextDelta):
            if self._text is None:
                self._text = f"{self.thread_id}-text-{event.offset}"
                yield TextMessageStartEvent(messageId=self._text, role="assistant")
            yield TextMessageContentEvent(messageId=self._text, delta=event.text)
        elif isinstance(event, ReasoningDelta):
            if self._reasoning is None:
                self._reasoning = f"{self.thread_id}-reasoning-{event.offset}"
                yield ReasoningMessageStartEvent(messageId=self._reasoning, role="reasoning")
            yield ReasoningMessageContentEvent(messageId=self._reasoning, delta=event.text)
        elif isinstance(event, AttemptRestarted):
            yield from self._close_open()
            yield _custom(event)
        elif isinstance(event, MessageAppended):
            yield from self._message(event)
        elif isinstance(event, ToolStarted):
            yield StepStartedEvent(stepName=f"{event.name}#{event.slot}")
        elif isinstance(event, ToolFinished):
            yield StepFinishedEvent(stepName=f"{event.name}#{event.slot}")
        elif isinstance(event, Idle):
            yield from self._finish_run()
        elif isinstance(event, Ended):
            yield from self._ended(event)
        else:  # turn_started, approvals, usage, errors, gaps
            yield _custom(event)

    def _ended(self, event: Ended) -> Iterator[BaseEvent]:
        result = event.result
        error = event.error or (result.error if result is not None else None)
        if error or (result is not None and result.status != "done"):
            yield from self._close_open()
            yield RunErrorEvent(message=error or "the session failed")
            self.run_id = None
        else:
            yield from self._finish_run()

    def _message(self, event: MessageAppended) -> Iterator[BaseEvent]:
        message = event.message
        if isinstance(message, AssistantMessage):
            message_id = self._text or f"{self.thread_id}-m{event.index}"
            yield from self._close_open()
            for call in message.tool_calls or []:
                yield ToolCallStartEvent(
                    toolCallId=call.id, toolCallName=call.function.name, parentMessageId=message_id
                )
                yield ToolCallArgsEvent(toolCallId=call.id, delta=call.function.arguments)
                yield ToolCallEndEvent(toolCallId=call.id)
        elif isinstance(message, ToolMessage):
            content = message.content if isinstance(message.content, str) else str(message.content)
            yield ToolCallResultEvent(
                messageId=f"{self.thread_id}-m{event.index}",
                toolCallId=message.tool_call_id,
                content=content,
            )
        else:  # the user's words, a system message, one too big to carry
            yield _custom(event)

    def _close_open(self) -> Iterator[BaseEvent]:
        if self._reasoning is not None:
            yield ReasoningMessageEndEvent(messageId=self._reasoning)
            self._reasoning = None
        if self._text is not None:
            yield TextMessageEndEvent(messageId=self._text)
            self._text = None

    def _finish_run(self) -> Iterator[BaseEvent]:
        yield from self._close_open()
        if self.run_id is not None:
            yield RunFinishedEvent(threadId=self.thread_id, runId=self.run_id)
            self.run_id = None


def _custom(event: LiveEvent) -> CustomEvent:
    value = event.model_dump(mode="json")
    return CustomEvent(name=f"durable_agent.{event.type}", value=value)
