"""``POST /v1/chat/completions`` (streamed and not) and ``GET /v1/models``: the clients
built on OpenAI's SDK talk to durable sessions.

Chat Completions is stateless: a client sends the whole conversation each time. The
session is found from it: ``chat-KEY-N``, where KEY hashes the caller, the agent and
the first user message, and N is the first such session whose array (its user
messages and answers) is the request's history. Such a session gets the last user
message; if none is, a new one starts with the history and the message. A request
whose last message the session has already (a client sending again after a
disconnect, or after a person decided a call) gets its answer, waited for if need
be, the same text streamed or not, and nothing is sent twice.
``Durable-Session-Id`` (a header) or ``metadata.session_id`` names a session instead.

The answer is the reply's last text. Tool calls run on the workers; a call waiting
for a person is the reply's text (the calls that wait, and how to decide it, for any chat
window) and its ``durable_agent`` field (the same, for programs). The session's id
comes back in the ``Durable-Session-Id`` header. A chat's session ends after
``CHAT_IDLE_SECONDS`` without a message; the client's next request resumes it.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from durable_agent._client.results import SessionNotFoundError
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import AssistantMessage, Message, UserMessage, text_of

from ._context import GatewayContext, HttpError, parse_json
from ._openai_common import (
    Reply,
    agent_for,
    answer_now,
    approvals_extension,
    conversation_key,
    follow_reply,
    models_listing,
    openai_errors,
    reply_of,
    text_deltas,
    waiting_text,
)

#: Sessions one caller may have begun with the same first message, for one agent.
MAX_CHATS = 50
#: How long a chat's session waits for the next message before it ends (unless its spec
#: says sooner): a stateless client may never come back, and one that does resumes it
#: from its history.
CHAT_IDLE_SECONDS = 3600.0
SESSION_HEADER = "Durable-Session-Id"


class ChatRequest(BaseModel):
    """What is read of a request; sampling settings a client sends are accepted and
    left to the agent's spec."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    metadata: dict[str, str] | None = None
    tools: list[Any] | None = None


def chat_routes(
    gateway: GatewayContext, named: Mapping[str, AgentSpec], has_default: bool
) -> list[Route]:
    agents = gateway.agents

    async def models(request: Request) -> Response:
        return JSONResponse(models_listing(named, has_default))

    async def completions(request: Request) -> Response:
        body = parse_json(await request.body(), ChatRequest)
        if body.tools:
            raise HttpError(400, "tools: the agent's tools are the workers'; send none", "tools")
        spec = _ending(agent_for(gateway, named, body.model))
        owner = gateway.owner_of(request)
        history, message = _history(body.messages)
        asked = _said([*history, message])
        named_session = request.headers.get(SESSION_HEADER) or (body.metadata or {}).get(
            "session_id"
        )
        if named_session:
            session_id = await gateway.session(request, named_session)
            array: list[Message] | None = None
        else:
            session_id, array = await _find(gateway, request, body.model, asked)
        if array is not None and len(_said(array)) > len(asked) - 1:  # sent already
            # where the events are, then the array: an answer landing between the two
            # reads is in the array or after that offset, never missed
            after = await agents.session(session_id).latest_offset()
            array = await agents.session(session_id).messages()
            at = _index_of(array, len(asked) - 1)
            answer = _answer_after(array, at)
            if answer is None:  # still waiting for a person: say so again, as the first time
                pending = (await agents.session(session_id).status()).pending_approvals
                answer = Reply(pending=pending) if pending else None
            if answer is not None:
                return await _respond(body, session_id, at, answer_now(answer))
            steps = follow_reply(gateway, session_id, after, at)
            return await _respond(body, session_id, at, steps)
        if array is None and not named_session:  # a new conversation: its history first
            await agents.start(spec, message, session_id=session_id, history=history, owner=owner)
            after, before = -1, 0
        else:
            after = await gateway.offset(session_id)
            sent = await agents.converse(session_id, message, spec, owner=owner)
            before = sent.before
        steps = follow_reply(gateway, session_id, after, before)
        return await _respond(body, session_id, before, steps)

    return [
        Route("/v1/models", openai_errors(models)),
        Route("/v1/chat/completions", openai_errors(completions), methods=["POST"]),
    ]


def _ending(spec: AgentSpec) -> AgentSpec:
    """``spec`` whose session ends after ``CHAT_IDLE_SECONDS`` without a message."""
    idle = spec.session.idle_timeout_seconds
    if idle is not None and idle <= CHAT_IDLE_SECONDS:
        return spec
    rules = spec.session.model_copy(update={"idle_timeout_seconds": CHAT_IDLE_SECONDS})
    return spec.model_copy(update={"session": rules})


async def _find(
    gateway: GatewayContext, request: Request, model: str, asked: list[tuple[str, str]]
) -> tuple[str, list[Message] | None]:
    """The session this history belongs to, and its array (``None``: a new one)."""
    first = next(text for role, text in asked if role == "user")
    key = conversation_key(gateway.owner_of(request), model, first)
    for n in range(1, MAX_CHATS + 1):
        session_id = f"chat-{key}-{n}"
        try:
            array = await gateway.agents.session(
                await gateway.session(request, session_id)
            ).messages()
        except SessionNotFoundError:
            return session_id, None
        seen = _said(array)
        if seen == asked[:-1] or seen[: len(asked)] == asked:
            return session_id, array
    raise HttpError(409, f"{MAX_CHATS} conversations began with this message", "messages")


def _history(raw: list[dict[str, Any]]) -> tuple[list[Message], UserMessage]:
    """The conversation a client sent, and its last user message: its user messages
    and answers only (system messages are the agent's, tool calls the workers': a
    request brings neither)."""
    found: list[Message] = []
    for k, item in enumerate(raw):
        role = item.get("role")
        try:
            if role == "user":
                found.append(
                    UserMessage.model_validate({"role": "user", "content": item.get("content")})
                )
            elif role == "assistant" and item.get("content") and not item.get("tool_calls"):
                found.append(AssistantMessage(content=text_of(item["content"])))
        except ValidationError as error:
            raise HttpError(
                400, f"messages.{k}: {error.errors()[0]['msg']}", f"messages.{k}"
            ) from None
    last = found.pop() if found else None
    if not isinstance(last, UserMessage):
        raise HttpError(400, "messages: the last message must be the user's", "messages")
    return found, last


def _said(messages: list[Message]) -> list[tuple[str, str]]:
    """What a conversation says, as a client sees it: user messages and answers."""
    said: list[tuple[str, str]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            said.append(("user", text_of(message.content)))
        elif isinstance(message, AssistantMessage) and message.content and not message.tool_calls:
            said.append(("assistant", message.content))
    return said


def _index_of(array: list[Message], said_at: int) -> int:
    """The array index of the ``said_at``-th thing said."""
    count = -1
    for index, message in enumerate(array):
        if _said([message]):
            count += 1
            if count == said_at:
                return index
    raise HttpError(409, "the conversation changed while it was read", "messages")


def _answer_after(array: list[Message], at: int) -> Reply | None:
    """The answer to the user message at ``at``, if the session has given it."""
    following = array[at + 1 :]
    end = next((k for k, m in enumerate(following) if isinstance(m, UserMessage)), None)
    turn = following[:end]
    last = turn[-1] if turn else None
    if not isinstance(last, AssistantMessage) or last.tool_calls:
        return None  # still being answered
    return reply_of(turn)


async def _respond(
    body: ChatRequest, session_id: str, before: int, steps: AsyncIterator[Any]
) -> Response:
    ident = f"chatcmpl-{session_id}-{before}"
    headers = {SESSION_HEADER: session_id}
    if body.stream:
        include_usage = bool((body.stream_options or {}).get("include_usage"))
        chunks = _chunks(ident, body.model, session_id, steps, include_usage)
        return EventSourceResponse(chunks, sep="\n", headers=headers, ping=15)
    reply = Reply()
    async for step in steps:
        if isinstance(step, Reply):
            reply = step
    if reply.ended is not None:
        error = {
            "message": f"the session ended: {reply.ended}",
            "type": "server_error",
            "param": None,
            "code": "session_ended",
        }
        return JSONResponse({"error": error}, status_code=502, headers=headers)
    return JSONResponse(_completion(ident, body.model, session_id, reply), headers=headers)


def _completion(ident: str, model: str, session_id: str, reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    found: dict[str, Any] = {
        "id": ident,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "logprobs": None,
                "message": {"role": "assistant", "content": _content(session_id, reply)},
            }
        ],
        "usage": {
            "prompt_tokens": usage.prompt_tokens or 0,
            "completion_tokens": usage.completion_tokens or 0,
            "total_tokens": usage.total_tokens or 0,
        },
    }
    if reply.pending:
        found["durable_agent"] = approvals_extension(session_id, reply.pending)
    if reply.hosted:  # Chat Completions has no item for a provider's tool: an extension
        found["hosted_tools"] = [c.model_dump() for c in reply.hosted]
    return found


def _content(session_id: str, reply: Reply) -> str:
    """The answer, or, when the reply waits for a person, the calls that wait and how to decide."""
    if reply.pending and not reply.text:
        return waiting_text(session_id, reply.pending)
    return reply.text


async def _chunks(
    ident: str, model: str, session_id: str, steps: AsyncIterator[Any], include_usage: bool
) -> AsyncIterator[ServerSentEvent]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> ServerSentEvent:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
        said = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": choices,
            **more,
        }
        return ServerSentEvent(data=_json(said), sep="\n")

    yield chunk({"role": "assistant", "content": ""})
    reply = Reply()
    async for step in steps:
        if isinstance(step, Reply):
            reply = step
        elif text := text_deltas(step):
            yield chunk({"content": text})
    if reply.pending and not reply.text:  # a chat window shows the calls that wait
        yield chunk({"content": waiting_text(session_id, reply.pending)})
    extra: dict[str, Any] = (
        {"durable_agent": approvals_extension(session_id, reply.pending)} if reply.pending else {}
    )
    if reply.ended is not None:
        extra["durable_agent"] = {"session_id": session_id, "ended": reply.ended}
    if reply.hosted:
        extra["hosted_tools"] = [c.model_dump() for c in reply.hosted]
    yield chunk({}, "stop", **extra)
    if include_usage:
        usage = reply.usage
        totals = {
            "prompt_tokens": usage.prompt_tokens or 0,
            "completion_tokens": usage.completion_tokens or 0,
            "total_tokens": usage.total_tokens or 0,
        }
        said = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": totals,
        }
        yield ServerSentEvent(data=_json(said), sep="\n")
    yield ServerSentEvent(data="[DONE]", sep="\n")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
