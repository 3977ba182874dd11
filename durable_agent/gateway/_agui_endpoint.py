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
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from ag_ui.core import (
    BaseEvent,
    MessagesSnapshotEvent,
    ResumeEntry,
    RunAgentInput,
    StateSnapshotEvent,
)
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from durable_agent._contracts._contracts import SessionStatus
from durable_agent._contracts._events import Ended, Idle, LiveEvent
from durable_agent._wire._messages import UserMessage
from durable_agent._wire._transcript import sender_id

from ._agui import AguiTranslator, messages_snapshot
from ._context import GatewayContext
from ._http_common import HttpError, json_errors, parse_json
from ._unstreamed import from_call_start, whole_replies

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
        if after >= 0 and (said is None or await _delivered(gateway, session_id, said[0])):
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


async def _delivered(gateway: GatewayContext, session_id: str, message_id: str) -> bool:
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
