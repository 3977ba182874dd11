"""``POST /api/agui``: an AG-UI 1.0 agent endpoint, as the official client
(``@ag-ui/client``'s ``HttpAgent``) calls it.

The thread is the conversation (one durable session per user and thread). A run
does one of three things:

- **a new user message** (the last of ``messages``, by id not seen yet): it is sent,
  starting the session if need be, and the run streams until the session answers,
  or ends with the ``interrupt`` outcome when a tool call waits for a person;
- **``resume``**: each entry answers one of those interrupts (``{"approved": bool,
  "reason"?}``, or ``cancelled``: denied; ``{"output": "..."}`` for an interrupt of
  reason ``tool_output``, a call whose output the client gives), as the caller, and
  the run streams on;
- **neither** (a client back after a disconnect, sending what it had): the run
  starts with a ``MESSAGES_SNAPSHOT`` of the session's array and streams whatever
  is still under way to its end.

Every run opens and closes with a ``STATE_SNAPSHOT`` of the session's status.
Events are framed with ``\\n`` line ends, as AG-UI's own encoder writes them.

The translation of a session's live events into AG-UI events (``AguiTranslator``) is
here too; its mapping is written out below.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

from ag_ui.core import AssistantMessage as AguiAssistant
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core import Message as AguiMessage
from ag_ui.core import SystemMessage as AguiSystem
from ag_ui.core import ToolMessage as AguiTool
from ag_ui.core import UserMessage as AguiUser
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from durable_agent._contracts.approvals import PendingApproval
from durable_agent._contracts.boundary import SessionStatus
from durable_agent._contracts.events import (
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
from durable_agent._wire.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    text_of,
)
from durable_agent._wire.transcript import sender_id

from ._context import GatewayContext, HttpError, json_errors, parse_json
from ._openai_common import from_call_start, whole_replies

# A session's live events in the AG-UI 1.0 encoding (the ``ag-ui-protocol`` package), so
# AG-UI front ends can follow and drive a session.
#
# The mapping (docs/how-to/live-sessions.md has it for readers):
#
# - a run per answered message: ``RUN_STARTED`` .. ``RUN_FINISHED`` (``RUN_ERROR`` when
#   the session fails);
# - each model call a step (``model:TURN``) and each tool call a step
#   (``tool:NAME#SLOT``);
# - text as ``TEXT_MESSAGE_*``, reasoning as ``REASONING_START``, ``REASONING_MESSAGE_*``,
#   ``REASONING_END``;
# - the model's tool calls as ``TOOL_CALL_START/ARGS/END``, their results as
#   ``TOOL_CALL_RESULT``;
# - a call waiting for a person ends the run with the ``interrupt`` outcome (one
#   interrupt per approval, naming the tool call); the next run's ``resume`` answers it;
# - what AG-UI has no words for (usage, restarts, turn and capacity notices) as
#   ``CUSTOM`` events named ``durable_agent.TYPE``.

#: What an approval's ``resume`` entry carries back (its ``payload``).
APPROVAL_ANSWER = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
#: The answer to a call whose output the client gives (``{"approved": false}`` denies it).
OUTPUT_ANSWER = {
    "type": "object",
    "properties": {"output": {"type": "string"}},
    "required": ["output"],
}


class AguiTranslator:
    """Stateful: which run, step, text and reasoning message are open."""

    def __init__(self, thread_id: str, run_id: str | None = None) -> None:
        self.thread_id = thread_id
        self._fixed_run = run_id
        self.run_id: str | None = None
        self._text: str | None = None
        self._reasoning: str | None = None
        self._steps: list[str] = []
        self._calls: dict[int, str] = {}
        """The latest batch's tool call ids by slot (an approval names its slot)."""

    def open_run(self, from_offset: int | None = None) -> RunStartedEvent:
        """A run starts: the one the caller named, else one named by where it starts."""
        self.run_id = self._fixed_run or f"{self.thread_id}-{from_offset}"
        return RunStartedEvent(threadId=self.thread_id, runId=self.run_id)

    def translate(self, event: LiveEvent) -> Iterator[BaseEvent]:
        if self.run_id is None and not isinstance(event, Ended | Idle):
            yield self.open_run(event.offset)
        if isinstance(event, ModelStarted):
            yield from self._close_open()
            yield from self._step(f"model:{event.turn}")
        elif isinstance(event, TextDelta):
            yield from self._close_reasoning()  # the model thought, now it answers
            if self._text is None:
                self._text = f"{self.thread_id}-text-{event.offset}"
                yield TextMessageStartEvent(messageId=self._text, role="assistant")
            yield TextMessageContentEvent(messageId=self._text, delta=event.text)
        elif isinstance(event, ReasoningDelta):
            if self._reasoning is None:
                self._reasoning = f"{self.thread_id}-reasoning-{event.offset}"
                yield ReasoningStartEvent(messageId=self._reasoning)
                yield ReasoningMessageStartEvent(messageId=self._reasoning, role="reasoning")
            yield ReasoningMessageContentEvent(messageId=self._reasoning, delta=event.text)
        elif isinstance(event, AttemptRestarted):
            yield from self._close_open()
            yield _custom(event)
        elif isinstance(event, MessageAppended):
            yield from self._message(event)
        elif isinstance(event, ToolStarted):
            yield from self._step(f"tool:{event.name}#{event.slot}")
        elif isinstance(event, ToolFinished):
            yield from self._end_step(f"tool:{event.name}#{event.slot}")
        elif isinstance(event, Idle):
            yield from self.finish_run()
        elif isinstance(event, Ended):
            yield from self._ended(event)
        else:  # turn_started, approvals, usage, errors, gaps
            yield _custom(event)

    def knows_calls(self, messages: Sequence[Message]) -> None:
        """Learn the latest batch's call ids from the array (a client that rejoins saw
        no events: its interrupts still name their calls)."""
        for message in reversed(messages):
            if isinstance(message, AssistantMessage) and message.tool_calls:
                self._calls = {k: c.id for k, c in enumerate(message.tool_calls)}
                return

    def interrupt(self, pending: Sequence[PendingApproval]) -> Iterator[BaseEvent]:
        """End the run waiting for these approvals (the ``interrupt`` outcome)."""
        interrupts = [
            Interrupt(
                id=p.approval_id,
                reason="tool_output" if p.awaits_output else "tool_approval",
                message=p.for_approver(),
                tool_call_id=self._calls.get(p.slot),
                response_schema=OUTPUT_ANSWER if p.awaits_output else APPROVAL_ANSWER,
                expires_at=p.deadline.isoformat() if p.deadline else None,
            )
            for p in pending
        ]
        yield from self.finish_run(RunFinishedInterruptOutcome(interrupts=interrupts))

    def finish_run(self, outcome: RunFinishedInterruptOutcome | None = None) -> Iterator[BaseEvent]:
        yield from self._close_open()
        for step in reversed(self._steps):
            yield StepFinishedEvent(stepName=step)
        self._steps.clear()
        if self.run_id is not None:
            yield RunFinishedEvent(threadId=self.thread_id, runId=self.run_id, outcome=outcome)
            self.run_id = None

    def _ended(self, event: Ended) -> Iterator[BaseEvent]:
        result = event.result
        error = event.error or (result.error if result is not None else None)
        if error or (result is not None and result.status != "done"):
            yield from self._close_open()
            yield RunErrorEvent(message=error or "the session failed")
            self.run_id = None
        else:
            yield from self.finish_run()

    def _message(self, event: MessageAppended) -> Iterator[BaseEvent]:
        message = event.message
        if isinstance(message, AssistantMessage):
            message_id = self._text or f"{self.thread_id}-m{event.index}"
            yield from self._close_open()
            yield from self._end_step(next((s for s in self._steps if s.startswith("model:")), ""))
            self._calls = {k: c.id for k, c in enumerate(message.tool_calls or [])}
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

    def _step(self, name: str) -> Iterator[BaseEvent]:
        yield from self._end_step(name)  # a restarted step is one step
        self._steps.append(name)
        yield StepStartedEvent(stepName=name)

    def _end_step(self, name: str) -> Iterator[BaseEvent]:
        if name in self._steps:
            self._steps.remove(name)
            yield StepFinishedEvent(stepName=name)

    def _close_reasoning(self) -> Iterator[BaseEvent]:
        if self._reasoning is not None:
            yield ReasoningMessageEndEvent(messageId=self._reasoning)
            yield ReasoningEndEvent(messageId=self._reasoning)
            self._reasoning = None

    def _close_open(self) -> Iterator[BaseEvent]:
        yield from self._close_reasoning()
        if self._text is not None:
            yield TextMessageEndEvent(messageId=self._text)
            self._text = None


def messages_snapshot(thread_id: str, messages: Sequence[Message]) -> MessagesSnapshotEvent:
    """The session's array as AG-UI messages (a client that reconnects starts from it).
    A message a client sent keeps the id the client gave it (the client knows it by that
    and skips what it holds); every other one is named by its index, as the live events
    name it, so no id the session gave is mistaken for one a client chose."""
    found: list[AguiMessage] = []
    given = {i for m in messages if (i := sender_id(m)) is not None}
    for index, message in enumerate(messages):
        ident = sender_id(message) or _own_name(thread_id, index, given)
        if isinstance(message, UserMessage):
            found.append(AguiUser(id=ident, content=text_of(message.content)))
        elif isinstance(message, SystemMessage):
            found.append(AguiSystem(id=ident, content=text_of(message.content)))
        elif isinstance(message, AssistantMessage):
            calls = [
                ToolCall(
                    id=c.id,
                    function=FunctionCall(name=c.function.name, arguments=c.function.arguments),
                )
                for c in message.tool_calls or []
            ]
            found.append(
                AguiAssistant(id=ident, content=message.content or None, tool_calls=calls or None)
            )
        elif isinstance(message, ToolMessage):
            content = text_of(message.content)
            found.append(AguiTool(id=ident, content=content, tool_call_id=message.tool_call_id))
    return MessagesSnapshotEvent(messages=found)


def _own_name(thread_id: str, index: int, given: set[str]) -> str:
    """The AG-UI id of a message the session made: ``<thread>-m<index>``, lengthened in
    the rare case a client chose that very string for one of its own."""
    name = f"{thread_id}-m{index}"
    while name in given:
        name += "'"
    return name


def _custom(event: LiveEvent) -> CustomEvent:
    value = event.model_dump(mode="json")
    return CustomEvent(name=f"durable_agent.{event.type}", value=value)


#: Line ends of the event stream: AG-UI's encoder and client use ``\n``.
SSE_SEP = "\n"


def agui_routes(gateway: GatewayContext) -> list[Route]:
    agents = gateway.agents

    async def run_agent(request: Request) -> Response:
        run = parse_json(await request.body(), RunAgentInput)
        session_id = await gateway.conversation(request, run.thread_id)
        after = await gateway.offset(session_id)
        translator = AguiTranslator(run.thread_id, run.run_id)
        if run.resume:
            if after < 0:
                raise HttpError(404, f"resume: thread {run.thread_id!r} has no session", "resume")
            for entry in run.resume:
                output = _output(entry)
                if output is not None:  # a call whose output the client gives
                    await gateway.commit_output(request, session_id, entry.interrupt_id, output)
                    continue
                approved, reason = _answer(entry)
                await gateway.decide(
                    request, session_id, entry.interrupt_id, approved, reason=reason
                )
            return _stream(_follow(gateway, session_id, after, -1, translator))
        said = _last_user_message(run)
        if after >= 0 and (said is None or await delivered(gateway, session_id, said[0])):
            return _stream(_rejoin(gateway, session_id, after, translator))
        if said is None:
            raise HttpError(400, "messages: the last message is not the user's", "messages")
        message = UserMessage(id=said[0], content=said[1])
        owner = gateway.owner_of(request)
        sent = await agents.converse(session_id, message, gateway.needs_spec(None), owner=owner)
        return _stream(_follow(gateway, session_id, after, sent.before, translator))

    return [Route("/api/agui", json_errors(run_agent), methods=["POST"])]


def agui_sse(stream: AsyncIterator[LiveEvent], translator: AguiTranslator) -> Response:
    """A session's events, followed, in the AG-UI encoding (``?format=agui``)."""

    async def events() -> AsyncIterator[ServerSentEvent]:
        async for event in stream:
            for out in translator.translate(event):
                yield _sse(out, event.offset)

    return _stream(events())


async def _follow(
    gateway: GatewayContext,
    session_id: str,
    after: int,
    before: int,
    translator: AguiTranslator,
    joined: MessagesSnapshotEvent | None = None,
) -> AsyncIterator[ServerSentEvent]:
    """The run: its events until the session answers (more than ``before`` messages;
    ``-1``: any answer), asks a person, or ends. ``joined``: the array when a client
    joins mid-reply (it missed the reply's start, whose text is left out: the whole
    array closes the run)."""
    agents = gateway.agents
    yield _sse(translator.open_run())
    if joined is not None:
        yield _sse(joined)
    yield _sse(_state(await agents.session(session_id).status()))
    events = from_call_start(whole_replies(gateway.hubs.follow(session_id, after)))
    async for event in events:
        if isinstance(event, Idle) and event.message_count > before:
            if joined is not None:
                array = await agents.session(session_id).messages()
                yield _sse(messages_snapshot(translator.thread_id, array))
            yield _sse(_state(await agents.session(session_id).status()))
            for out in translator.finish_run():
                yield _sse(out, event.offset)
            return
        for out in translator.translate(event):
            yield _sse(out, event.offset)
        if isinstance(event, Ended):
            return
        if event.type == "approval_requested":
            status = await agents.session(session_id).status()
            yield _sse(_state(status))
            for out in translator.interrupt(status.pending_approvals):
                yield _sse(out)
            return


async def _rejoin(
    gateway: GatewayContext, session_id: str, after: int, translator: AguiTranslator
) -> AsyncIterator[ServerSentEvent]:
    """A client back after a disconnect: the array as it is, then the run under way."""
    agents = gateway.agents
    status = await agents.session(session_id).status()
    array = await agents.session(session_id).messages()
    snapshot = messages_snapshot(translator.thread_id, array)
    translator.knows_calls(array)
    if status.phase == "awaiting_approval":
        yield _sse(translator.open_run())
        yield _sse(snapshot)
        yield _sse(_state(status))
        for out in translator.interrupt(status.pending_approvals):
            yield _sse(out)
    elif status.phase in ("idle", "done", "failed"):
        yield _sse(translator.open_run())
        yield _sse(snapshot)
        yield _sse(_state(status))
        for out in translator.finish_run():
            yield _sse(out)
    else:  # mid-reply: follow it from here to its answer
        count = status.message_count
        async for sent in _follow(gateway, session_id, after, count, translator, snapshot):
            yield sent


def _stream(events: AsyncIterator[ServerSentEvent]) -> Response:
    return EventSourceResponse(events, ping=15, sep=SSE_SEP)


def _sse(event: BaseEvent, offset: int | None = None) -> ServerSentEvent:
    data = event.model_dump_json(by_alias=True, exclude_none=True)
    return ServerSentEvent(data=data, id=None if offset is None else str(offset), sep=SSE_SEP)


def _state(status: SessionStatus) -> StateSnapshotEvent:
    """What a front end shows beside the transcript: the session's status, in short."""
    shown = status.model_dump(
        mode="json",
        include={
            "phase",
            "turn",
            "message_count",
            "queued_messages",
            "runs",
            "usage",
            "budget",
            "last_error",
            "agent",
            "version",
            "waiting_for_capacity",
        },
        exclude_none=True,
    )
    shown["pending_approvals"] = [p.approval_id for p in status.pending_approvals]
    return StateSnapshotEvent(snapshot=shown)


def _last_user_message(run: RunAgentInput) -> tuple[str, str] | None:
    """The last message's id and text, when it is the user's (``None`` otherwise)."""
    if not run.messages or run.messages[-1].role != "user":
        return None
    message = run.messages[-1]
    content = message.content
    if isinstance(content, str):
        text = content
    else:
        text = " ".join(getattr(part, "text", "") or "" for part in content)
    if not text.strip():
        raise HttpError(400, "messages: the last user message has no text", "messages")
    return message.id, text


#: How far back a message sent again is looked for: a client resends its latest.
RESENT_WINDOW = 50


async def delivered(gateway: GatewayContext, session_id: str, message_id: str) -> bool:
    """The session has this user message already, among its latest messages (the
    client sends it again): one the client gave this id, never one the session did."""
    agents = gateway.agents
    count = (await agents.session(session_id).status()).message_count
    latest = await agents.session(session_id).messages(max(count - RESENT_WINDOW, 0))
    return any(isinstance(m, UserMessage) and sender_id(m) == message_id for m in latest)


def _output(entry: ResumeEntry) -> str | None:
    """The output a resume entry gives a call whose tool takes it from outside (an
    interrupt of reason ``tool_output``), if it gives one."""
    payload = entry.payload
    if entry.status == "cancelled" or not isinstance(payload, dict):
        return None
    output = payload.get("output")
    return output if isinstance(output, str) else None


def _answer(entry: ResumeEntry) -> tuple[bool, str | None]:
    """A resume entry as a decision: approved or not, and why."""
    if entry.status == "cancelled":
        return False, "cancelled in the client"
    payload = entry.payload
    if isinstance(payload, bool):
        return payload, None
    if isinstance(payload, dict) and isinstance(payload.get("approved"), bool):
        reason = payload.get("reason")
        return payload["approved"], reason if isinstance(reason, str) else None
    raise HttpError(
        400,
        'resume: payload is {"approved": true|false, "reason"?}, or {"output": "..."} for a '
        "call whose output the client gives",
        "resume",
    )
