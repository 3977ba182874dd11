"""``POST /api/ai-sdk/chat``, ``GET /api/ai-sdk/chat/{chat_id}/stream`` and ``GET
/api/ai-sdk/chat/{chat_id}/messages``: the Vercel AI SDK's chat protocol, as its
``DefaultChatTransport`` (``useChat`` in React, Vue and Svelte) calls it, answered with
its UI message stream, and a chat's past messages as the ``UIMessage`` list a page
gives ``useChat({messages})`` when it loads.

The chat id is the conversation (one durable session per user and chat, as AG-UI maps
a thread). A request does one of three things:

- **a new user message** (the last of ``messages``, by an id the session has not seen):
  its text is sent, starting the session if need be, and the reply streams until the
  session answers, or until a tool call waits for a person;
- **approval answers** (the last message is the assistant's, and its tool parts in the
  state ``approval-responded`` carry ``approval: {id, approved, reason}``, as
  ``addToolApprovalResponse`` leaves them): each is decided as the caller, signed as
  every door signs, and the reply streams on (an answer sent again, for a call decided
  already, decides nothing);
- **the same user message again** (a page back after a disconnect): nothing is sent;
  the reply under way streams to its end.

``GET .../{chat_id}/stream`` is the transport's ``resumeStream``: the reply still under
way (or waiting for a person), replayed from its start out of the session's array and
then followed live; ``204`` when nothing is under way.

``GET .../{chat_id}/messages`` reads the session's array as UI messages: each user
message by the id the page gave it, and after it one assistant message (its id the one
the stream's ``start`` gave) holding the reply's steps, with each tool part in the state
it has now; a call waiting for a person is ``approval-requested`` under the approval id
the stream gave, so a reloaded page answers it with ``addToolApprovalResponse``. A chat
the caller has not begun is a 404, as another user's chat of that id is.

What the protocol cannot say here is refused with a 4xx that says what to do instead:
files and other non-text parts of a user message, ``regenerate-message`` (a durable
session never takes a reply back), and an approval answer for a call that is not
waiting in this chat.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from durable_agent._contracts.approvals import PendingApproval
from durable_agent._contracts.events import (
    AttemptRestarted,
    Ended,
    ErrorReported,
    HostedToolUsed,
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
    HostedCall,
    Message,
    ToolMessage,
    UserMessage,
    cited_sources,
    hosted_calls,
    text_of,
)
from durable_agent._wire.transcript import sender_id

from ._agui import RESENT_WINDOW, delivered
from ._context import GatewayContext, HttpError, json_errors, parse_json
from ._openai_common import from_call_start

# The mapping of a session's live events onto UI message chunks (the ``ai`` package's
# ``uiMessageChunkSchema``; docs/how-to/web-chat.md has it for readers):
#
# - each answer is one assistant UI message: ``start`` .. ``finish``, then ``[DONE]``;
# - each model call a step (``start-step`` .. ``finish-step``); a call started over (its
#   worker was lost, or the provider failed) is ``reset-step``: the page drops what the
#   lost attempt showed, and the attempt's text streams again;
# - text as ``text-start/delta/end``, reasoning as ``reasoning-start/delta/end``;
# - the model's tool calls as ``tool-input-start/delta/available`` (``dynamic``: the page
#   declares no tools of its own), results as ``tool-output-available``, a tool's error
#   as ``tool-output-error``, a call a person denied as ``tool-output-denied``;
# - a call of the provider's own tools (a web search) as a tool part with
#   ``providerExecuted``, after the text of its step, and the pages the answer cites
#   as ``source-url`` parts;
# - a call waiting for a person as ``tool-approval-request``, which ends the stream;
# - a failed session, or a model call that failed for good, as ``error``;
# - what the protocol has no words for (usage, turns, capacity) as the transient data
#   part ``data-durable-agent``: ``onData`` sees it, the message does not keep it.

#: The header that tells the AI SDK the body is its UI message stream.
STREAM_HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "x-accel-buffering": "no"}
#: Line ends of the event stream (the AI SDK's own encoder writes ``\n``).
SSE_SEP = "\n"

Chunk = dict[str, Any]


class UIApproval(BaseModel):
    """A tool part's ``approval``, as ``addToolApprovalResponse`` leaves it."""

    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1, max_length=200)
    approved: bool | None = None
    reason: str | None = Field(default=None, max_length=2000)


class UIPart(BaseModel):
    """One part of a UI message: only what the door reads (the rest is the page's)."""

    model_config = ConfigDict(extra="ignore")
    type: str
    text: str | None = None
    toolCallId: str | None = None  # the AI SDK spells it so
    state: str | None = None
    approval: UIApproval | None = None


class UIMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1, max_length=200)
    role: Literal["system", "user", "assistant"]
    parts: list[UIPart]


class UIChatRequest(BaseModel):
    """What ``DefaultChatTransport`` posts: the chat's id and its messages (a page's own
    ``body`` fields are ignored)."""

    model_config = ConfigDict(extra="ignore")
    id: str
    messages: list[UIMessage] = Field(min_length=1)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    messageId: str | None = None  # the AI SDK spells it so


class UIStreamTranslator:
    """Stateful: which step, text and reasoning part are open, and the latest batch's
    tool call ids by slot (an approval names its slot)."""

    def __init__(self, chat_id: str) -> None:
        self.chat_id = chat_id
        self._step = False
        self._text: str | None = None
        self._reasoning: str | None = None
        self._streamed = False
        """Text or reasoning of the current model call was streamed as deltas."""
        self.calls: dict[int, str] = {}
        self._error: str | None = None
        """The latest failure reported: the words of a failed model call's message."""

    def start(self, message_id: str | None) -> Chunk:
        return {"type": "start", **({"messageId": message_id} if message_id else {})}

    def translate(self, event: LiveEvent) -> Iterator[Chunk]:
        if isinstance(event, ModelStarted):
            yield from self._close_step()
            self._step, self._streamed = True, False
            yield {"type": "start-step"}
        elif isinstance(event, AttemptRestarted):
            self._text = self._reasoning = None
            self._streamed = False
            yield {"type": "reset-step"}
        elif isinstance(event, TextDelta):
            yield from self._open_step()
            yield from self._close_reasoning()  # the model thought, now it answers
            if self._text is None:
                self._text = f"{self.chat_id}-text-{event.offset}"
                yield {"type": "text-start", "id": self._text}
            self._streamed = True
            yield {"type": "text-delta", "id": self._text, "delta": event.text}
        elif isinstance(event, ReasoningDelta):
            yield from self._open_step()
            if self._reasoning is None:
                self._reasoning = f"{self.chat_id}-reasoning-{event.offset}"
                yield {"type": "reasoning-start", "id": self._reasoning}
            self._streamed = True
            yield {"type": "reasoning-delta", "id": self._reasoning, "delta": event.text}
        elif isinstance(event, MessageAppended) and event.message is not None:
            yield from self.message(event.message, event.offset)
        elif isinstance(event, Ended):
            yield from self._ended(event)
        elif not isinstance(event, Idle | ToolStarted | ToolFinished | HostedToolUsed):
            if isinstance(event, ErrorReported):
                self._error = event.text
            data = event.model_dump(mode="json")
            yield {"type": "data-durable-agent", "data": data, "transient": True}

    def message(self, message: Message, offset: int) -> Iterator[Chunk]:
        """A message of the reply: the model's (its text when it was not streamed, its
        tool calls), or a tool's result."""
        if isinstance(message, AssistantMessage):
            if message.is_error:
                yield from self._close_open()
                failed = message.content or self._error or "the model call failed"
                yield {"type": "error", "errorText": failed}
                return
            yield from self._open_step()
            if not self._streamed:  # deltas were off, held back, or this reader joined late
                if message.reasoning:
                    yield from self._whole("reasoning", message.reasoning, offset)
                if message.content:
                    yield from self._whole("text", message.content, offset)
            yield from self._close_open()
            for ran in hosted_calls(message.provider_items):
                yield from _hosted_chunks(ran)
            for url, title in cited_sources(message.provider_items):
                yield _source(url, title)
            self.calls = {k: c.id for k, c in enumerate(message.tool_calls or [])}
            for call in message.tool_calls or []:
                name, arguments = call.function.name, call.function.arguments
                yield {
                    "type": "tool-input-start",
                    "toolCallId": call.id,
                    "toolName": name,
                    "dynamic": True,
                }
                yield {
                    "type": "tool-input-delta",
                    "toolCallId": call.id,
                    "inputTextDelta": arguments,
                }
                yield {
                    "type": "tool-input-available",
                    "toolCallId": call.id,
                    "toolName": name,
                    "input": _input(arguments),
                    "dynamic": True,
                }
            yield from self._close_step()
            self._streamed = False
        elif isinstance(message, ToolMessage):
            call_id = message.tool_call_id
            if message.approval is not None and message.approval.decision == "denied":
                yield {"type": "tool-output-denied", "toolCallId": call_id}
            elif message.is_error:
                yield {
                    "type": "tool-output-error",
                    "toolCallId": call_id,
                    "errorText": message.content,
                }
            else:
                yield {
                    "type": "tool-output-available",
                    "toolCallId": call_id,
                    "output": message.content,
                    "dynamic": True,
                }

    def knows_calls(self, messages: Sequence[Message]) -> None:
        """Learn the latest batch's call ids from the array (a page that rejoins saw no
        events: its approval requests still name their calls)."""
        for message in reversed(messages):
            if isinstance(message, AssistantMessage) and message.tool_calls:
                self.calls = {k: c.id for k, c in enumerate(message.tool_calls)}
                return

    def approvals(self, pending: Sequence[PendingApproval]) -> Iterator[Chunk]:
        """The calls waiting for a person, then the end of the stream: the page answers
        with ``addToolApprovalResponse``, and its next request carries the answers."""
        yield from self._close_open()
        for p in pending:
            call = self.calls.get(p.slot)
            if call is None or p.awaits_output:
                continue  # a call whose output comes from outside: not in this protocol
            yield {
                "type": "tool-approval-request",
                "approvalId": p.approval_id,
                "toolCallId": call,
                "reason": p.for_approver(),
            }
        yield from self.finish("tool-calls")

    def finish(self, reason: str = "stop") -> Iterator[Chunk]:
        yield from self._close_step()
        yield {"type": "finish", "finishReason": reason}

    def _ended(self, event: Ended) -> Iterator[Chunk]:
        result = event.result
        error = event.error or (result.error if result is not None else None)
        if error or (result is not None and result.status != "done"):
            yield from self._close_step()
            yield {"type": "error", "errorText": error or "the session failed"}
            yield {"type": "finish", "finishReason": "error"}
        else:
            yield from self.finish()

    def _whole(self, kind: str, text: str, offset: int) -> Iterator[Chunk]:
        ident = f"{self.chat_id}-{kind}-{offset}"
        yield {"type": f"{kind}-start", "id": ident}
        yield {"type": f"{kind}-delta", "id": ident, "delta": text}
        yield {"type": f"{kind}-end", "id": ident}

    def _open_step(self) -> Iterator[Chunk]:
        if not self._step:
            self._step = True
            yield {"type": "start-step"}

    def _close_step(self) -> Iterator[Chunk]:
        yield from self._close_open()
        if self._step:
            self._step = False
            yield {"type": "finish-step"}

    def _close_reasoning(self) -> Iterator[Chunk]:
        if self._reasoning is not None:
            yield {"type": "reasoning-end", "id": self._reasoning}
            self._reasoning = None

    def _close_open(self) -> Iterator[Chunk]:
        yield from self._close_reasoning()
        if self._text is not None:
            yield {"type": "text-end", "id": self._text}
            self._text = None


def _hosted_chunks(call: HostedCall) -> Iterator[Chunk]:
    """A hosted call, as the AI SDK streams a tool its provider ran: its input, then how
    it went (the provider keeps what it found)."""
    said: Chunk = {"toolCallId": call.id, "providerExecuted": True, "dynamic": True}
    yield {"type": "tool-input-available", **said, "toolName": call.name, "input": call.detail}
    if call.status == "failed":
        yield {"type": "tool-output-error", **said, "errorText": f"{call.name} failed"}
    else:
        yield {"type": "tool-output-available", **said, "output": {"status": call.status}}


def _hosted_part(call: HostedCall) -> Chunk:
    """A hosted call as the tool part ``useChat`` built from ``_hosted_chunks``."""
    part: Chunk = {
        "type": "dynamic-tool",
        "toolName": call.name,
        "toolCallId": call.id,
        "state": "output-available",
        "input": call.detail,
        "providerExecuted": True,
        "output": {"status": call.status},
    }
    if call.status == "failed":
        del part["output"]
        part.update(state="output-error", errorText=f"{call.name} failed")
    return part


def _source(url: str, title: str) -> Chunk:
    titled = {"title": title} if title else {}
    return {"type": "source-url", "sourceId": url, "url": url, **titled}


def _input(arguments: str) -> Any:
    """A call's arguments as the JSON value the page shows (the text when it is not JSON)."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def ai_sdk_routes(gateway: GatewayContext) -> list[Route]:
    agents = gateway.agents

    async def chat(request: Request) -> Response:
        body = parse_json(await request.body(), UIChatRequest)
        if body.trigger == "regenerate-message":
            raise HttpError(
                400,
                "trigger: a durable session keeps every reply; send a new message instead of "
                "regenerating one",
                "trigger",
            )
        session_id = await gateway.conversation(request, body.id)
        after = await gateway.offset(session_id)
        translator = UIStreamTranslator(body.id)
        last = body.messages[-1]
        if last.role == "assistant":
            answers = _approval_answers(last)
            if not answers:
                raise HttpError(
                    400,
                    "messages: the last message is the assistant's and answers no approval; "
                    "send a user message",
                    "messages",
                )
            if after < 0:
                raise HttpError(404, f"chat {body.id!r} has no session", "id")
            if not await _decide(gateway, request, session_id, answers, translator):
                return _stream(_rejoin(gateway, session_id, translator))  # sent again
            return _stream(_follow(gateway, session_id, after, -1, translator, None))
        if last.role != "user":
            raise HttpError(400, "messages: the last message is not the user's", "messages")
        text = _text(last)
        if after >= 0 and await delivered(gateway, session_id, last.id):
            return _stream(_rejoin(gateway, session_id, translator))
        message = UserMessage(id=last.id, content=text)
        owner = gateway.owner_of(request)
        sent = await agents.converse(session_id, message, gateway.needs_spec(None), owner=owner)
        reply_id = f"{body.id}-m{sent.before + 1}"
        return _stream(_follow(gateway, session_id, after, sent.before, translator, reply_id))

    async def resume(request: Request) -> Response:
        chat_id = request.path_params["chat_id"]
        session_id = await gateway.conversation(request, chat_id)
        if await gateway.offset(session_id) < 0:
            return Response(status_code=204)
        translator = UIStreamTranslator(chat_id)
        phase = (await agents.session(session_id).status()).phase
        if phase in ("idle", "done", "failed"):
            return Response(status_code=204)  # nothing under way: the page has it all
        return _stream(_rejoin(gateway, session_id, translator))

    async def history(request: Request) -> Response:
        chat_id = request.path_params["chat_id"]
        session_id = await gateway.conversation(request, chat_id)
        if await gateway.offset(session_id) < 0:
            raise HttpError(
                404,
                f"chat {chat_id!r} has no messages yet: show an empty chat, and its first "
                "message begins it",
                "chat_id",
            )
        session = agents.session(session_id)
        status = await session.status()
        messages = await session.messages(limit=status.message_count)
        return JSONResponse(ui_messages(chat_id, messages, status.pending_approvals))

    return [
        Route("/api/ai-sdk/chat", json_errors(chat), methods=["POST"]),
        Route("/api/ai-sdk/chat/{chat_id}/stream", json_errors(resume), methods=["GET"]),
        Route("/api/ai-sdk/chat/{chat_id}/messages", json_errors(history), methods=["GET"]),
    ]


def ui_messages(
    chat_id: str, messages: Sequence[Message], pending: Sequence[PendingApproval]
) -> list[Chunk]:
    """The array as the AI SDK's ``UIMessage`` list. Each user message is one UI message;
    what follows it up to the next is the reply, one assistant UI message with a
    ``step-start`` per model call, as ``useChat`` built it from the stream. Ids come
    from the array alone (the page's own for its messages, the index of the reply's
    first message for a reply, the same the stream's ``start`` gave), so every read
    gives the same ones. System messages, records of the loop and failed model calls
    show nothing: the page never saw them as parts either."""
    found: list[Chunk] = []
    reply: Chunk | None = None
    tools: dict[str, Chunk] = {}
    latest, waiting = _waiting_calls(messages, pending)
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage):
            reply = None
            ident = sender_id(message) or f"{chat_id}-m{index}"
            text = {"type": "text", "text": text_of(message.content)}
            found.append({"id": ident, "role": "user", "parts": [text]})
            continue
        if not isinstance(message, AssistantMessage | ToolMessage):
            continue
        if reply is None:
            reply = {"id": f"{chat_id}-m{index}", "role": "assistant", "parts": []}
            found.append(reply)
        parts: list[Chunk] = reply["parts"]
        if isinstance(message, AssistantMessage):
            if not message.is_error:
                parts.extend(_step(message, waiting if index == latest else {}, tools))
        elif (part := tools.get(message.tool_call_id)) is not None:
            _settle(part, message, chat_id)
    return found


def _waiting_calls(
    messages: Sequence[Message], pending: Sequence[PendingApproval]
) -> tuple[int, dict[str, PendingApproval]]:
    """The latest batch of calls (its index in the array) and those of its calls that
    wait for a person, by call id: an approval names its slot in that batch. A call
    waiting for its output is left out, as the stream leaves it out."""
    for index in range(len(messages) - 1, -1, -1):
        batch = messages[index]
        if isinstance(batch, AssistantMessage) and batch.tool_calls:
            calls = batch.tool_calls
            asked = [p for p in pending if not p.awaits_output and p.slot < len(calls)]
            return index, {calls[p.slot].id: p for p in asked}
    return -1, {}


def _step(
    message: AssistantMessage,
    waiting: dict[str, PendingApproval],
    tools: dict[str, Chunk],
) -> Iterator[Chunk]:
    """One model call's parts: its reasoning, its text, and each tool call as it waits
    now (for a person, or for its result: ``input-available``)."""
    yield {"type": "step-start"}
    if message.reasoning:
        yield {"type": "reasoning", "text": message.reasoning, "state": "done"}
    if message.content:
        yield {"type": "text", "text": message.content, "state": "done"}
    yield from (_hosted_part(c) for c in hosted_calls(message.provider_items))
    yield from (_source(url, title) for url, title in cited_sources(message.provider_items))
    for call in message.tool_calls or []:
        part: Chunk = {
            "type": "dynamic-tool",
            "toolName": call.function.name,
            "toolCallId": call.id,
            "state": "input-available",
            "input": _input(call.function.arguments),
        }
        asked = waiting.get(call.id)
        if asked is not None:
            approval = {"id": asked.approval_id, "requestReason": asked.for_approver()}
            part.update(state="approval-requested", approval=approval)
        tools[call.id] = part
        yield part


def _settle(part: Chunk, result: ToolMessage, chat_id: str) -> None:
    """A tool part once its result is in: its output, its error, or denied. A decided
    call keeps how it was decided; its approval id is made from the call's, since the
    array does not keep the one it was asked under (only a waiting call's is answered)."""
    record = result.approval
    decided: Chunk | None = None
    if record is not None and record.decision in ("approved", "denied"):
        decided = {
            "id": f"{chat_id}-approval-{result.tool_call_id}",
            "approved": record.decision == "approved",
            **({"reason": record.reason} if record.reason else {}),
        }
    part.pop("approval", None)
    if decided is not None and not decided["approved"]:
        part.update(state="output-denied", approval=decided)
    elif result.is_error:
        part.update(state="output-error", errorText=result.content)
    else:
        part.update(state="output-available", output=result.content)
    if decided is not None and decided["approved"]:
        part["approval"] = decided


async def _follow(
    gateway: GatewayContext,
    session_id: str,
    after: int,
    before: int,
    translator: UIStreamTranslator,
    message_id: str | None,
    replayed: int = -1,
) -> AsyncIterator[Chunk | None]:
    """The reply: its events until the session answers (more than ``before`` messages;
    ``-1``: any answer), asks a person, or ends; ``None`` marks a clean end.
    ``replayed``: messages up to this index were replayed from the array already."""
    agents = gateway.agents
    if message_id is not None or replayed < 0:
        yield translator.start(message_id)
    events = from_call_start(gateway.hubs.follow(session_id, after))
    async for event in events:
        if isinstance(event, MessageAppended):
            if event.index <= replayed:
                continue
            if event.message is None:  # too big for the log: read it from the array
                [whole] = await agents.session(session_id).messages(event.index, limit=1)
                event = event.model_copy(update={"message": whole})
        if isinstance(event, Idle) and event.message_count > before:
            for chunk in translator.finish():
                yield chunk
            yield None
            return
        for chunk in translator.translate(event):
            yield chunk
        if isinstance(event, Ended):
            yield None
            return
        if event.type == "approval_requested":
            pending = (await agents.session(session_id).status()).pending_approvals
            for chunk in translator.approvals(pending):
                yield chunk
            yield None
            return


async def _rejoin(
    gateway: GatewayContext, session_id: str, translator: UIStreamTranslator
) -> AsyncIterator[Chunk | None]:
    """A page back after a disconnect: the reply under way replayed from its start (the
    array since the last user message), then followed live to its end."""
    session = gateway.agents.session(session_id)
    after = await session.latest_offset()
    status = await session.status()
    count = status.message_count
    start = max(count - RESENT_WINDOW, 0)
    recent = await session.messages(start)
    asked = max((i for i, m in enumerate(recent) if isinstance(m, UserMessage)), default=-1)
    reply = recent[asked + 1 :]
    translator.knows_calls(recent)
    yield translator.start(f"{translator.chat_id}-m{start + asked + 1}")
    for message in reply:
        for chunk in translator.message(message, after):
            yield chunk
    if status.phase == "awaiting_approval":
        for chunk in translator.approvals(status.pending_approvals):
            yield chunk
        yield None
        return
    if status.phase in ("idle", "done", "failed"):
        for chunk in translator.finish():
            yield chunk
        yield None
        return
    replayed = start + len(recent) - 1
    async for live in _follow(gateway, session_id, after, count, translator, None, replayed):
        yield live


def _approval_answers(message: UIMessage) -> list[tuple[str, str, bool, str | None]]:
    """The approval answers an assistant UI message carries: (approval id, call id,
    approved, reason), from its tool parts in the state ``approval-responded``."""
    found = []
    for part in message.parts:
        is_tool = part.type.startswith("tool-") or part.type == "dynamic-tool"
        if not is_tool or part.state != "approval-responded" or part.approval is None:
            continue
        if part.approval.approved is None or part.toolCallId is None:
            raise HttpError(400, "messages: an approval answer says approved true or false")
        found.append(
            (part.approval.id, part.toolCallId, part.approval.approved, part.approval.reason)
        )
    return found


async def _decide(
    gateway: GatewayContext,
    request: Request,
    session_id: str,
    answers: list[tuple[str, str, bool, str | None]],
    translator: UIStreamTranslator,
) -> int:
    """Decide each answer as the caller, once every one of them names a call waiting in
    this chat or one decided already (else nothing is decided): how many it decided.
    A call decided already is an answer sent again (the page lost the stream that
    followed it): it decides nothing, as at every door."""
    session = gateway.agents.session(session_id)
    status = await session.status()
    count = status.message_count
    recent = await session.messages(max(count - RESENT_WINDOW, 0))
    translator.knows_calls(recent)
    pending = {p.approval_id: p for p in status.pending_approvals}
    waiting_calls = {translator.calls.get(p.slot) for p in status.pending_approvals}
    made = {c.id for m in recent if isinstance(m, AssistantMessage) for c in m.tool_calls or []}
    to_decide = []
    for approval_id, call_id, approved, reason in answers:
        waiting = pending.get(approval_id)
        if waiting is None and call_id in made and call_id not in waiting_calls:
            continue  # decided already
        if waiting is None or translator.calls.get(waiting.slot) != call_id:
            raise HttpError(
                409,
                f"messages: approval {approval_id!r} of call {call_id!r} is not waiting in "
                "this chat; reload the chat to see what it waits for",
                "messages",
            )
        if waiting.awaits_output:
            raise HttpError(
                409,
                f"messages: call {call_id!r} waits for its output, which this door cannot "
                "give; give it through AG-UI or POST /api/sessions/{id}/approvals/{id}/output",
                "messages",
            )
        to_decide.append((approval_id, approved, reason))
    for approval_id, approved, reason in to_decide:
        await gateway.decide(request, session_id, approval_id, approved, reason=reason)
    return len(to_decide)


def _text(message: UIMessage) -> str:
    """The user message's text; a part the door cannot take is refused by name."""
    texts: list[str] = []
    for part in message.parts:
        if part.type == "text":
            texts.append(part.text or "")
        elif part.type != "step-start":
            raise HttpError(
                400,
                f"messages: this door takes text parts only, not {part.type!r}: send the "
                "file's content as text, or give it through a tool the agent has",
                "messages",
            )
    text = "\n".join(t for t in texts if t)
    if not text.strip():
        raise HttpError(400, "messages: the last user message has no text", "messages")
    return text


def _stream(chunks: AsyncIterator[Chunk | None]) -> Response:
    async def events() -> AsyncIterator[ServerSentEvent]:
        async for chunk in chunks:
            if chunk is None:  # a clean end, as the AI SDK's own streams end
                yield ServerSentEvent(data="[DONE]", sep=SSE_SEP)
                return
            yield ServerSentEvent(data=json.dumps(chunk), sep=SSE_SEP)

    return EventSourceResponse(events(), ping=15, sep=SSE_SEP, headers=STREAM_HEADERS)
