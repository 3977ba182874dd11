"""``POST /v1/responses`` and ``GET /v1/responses/{id}``: OpenAI's Responses API on
durable sessions.

Which session: ``conversation`` names one (the same conversation ids as the REST API
and AG-UI threads, each user's apart); ``previous_response_id`` goes on with the
session that answered it; neither starts one. A response's id names its session and
the message it answers, so it can be read again (``GET``) and continued from any
gateway replica.

``stream: true`` answers with OpenAI's event sequence (``response_events``, below).
A call waiting for a person comes back as an ``mcp_approval_request`` item (OpenAI's
own item for approving a tool call); the next request answers it with an
``mcp_approval_response`` input item (``approve``, and ``reason`` if denied),
decided as the caller. Sent again for a call that no longer waits, it decides
nothing and gets the answer to ``previous_response_id``'s response.
"""

from __future__ import annotations

import base64
import functools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from durable_agent._client.results import SessionNotFoundError
from durable_agent._contracts.boundary import SessionStatus
from durable_agent._contracts.events import HostedToolUsed, LiveEvent, ModelStarted, TextDelta
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import HostedCall, UserMessage

from ._context import GatewayContext, HttpError, parse_json
from ._openai_common import Reply, agent_for, answer_now, answered, follow_reply, openai_errors

# A Responses request answered as a stream (``stream: true``): OpenAI's event sequence,
# as the ``openai`` SDK's stream reader and its ``responses.stream`` helper expect it.
#
# Each model call that writes text is a ``message`` output item, streamed as
# ``response.output_text.delta`` events; calls waiting for a person are
# ``mcp_approval_request`` items; ``response.completed`` carries the whole response
# (``response.failed`` when the session ended without an answer).

class _Stream:
    """The events so far: their numbers, the items done, the message being written."""

    def __init__(self, ident: str) -> None:
        self.ident = ident
        self.number = 0
        self.items: list[dict[str, Any]] = []
        self.text: str | None = None

    def event(self, kind: str, **fields: Any) -> ServerSentEvent:
        self.number += 1
        said = {"type": kind, "sequence_number": self.number, **fields}
        return ServerSentEvent(data=json.dumps(said, ensure_ascii=False), event=kind, sep="\n")

    @property
    def _where(self) -> dict[str, Any]:
        return {"item_id": self._item_id, "output_index": len(self.items), "content_index": 0}

    @property
    def _item_id(self) -> str:
        return f"msg_{len(self.items)}_{self.ident.removeprefix('resp_')}"

    def open_message(self) -> list[ServerSentEvent]:
        self.text = ""
        item = {
            "id": self._item_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        part = {"type": "output_text", "text": "", "annotations": []}
        return [
            self.event("response.output_item.added", output_index=len(self.items), item=item),
            self.event("response.content_part.added", **self._where, part=part),
        ]

    def delta(self, text: str) -> ServerSentEvent:
        self.text = (self.text or "") + text
        return self.event("response.output_text.delta", **self._where, delta=text, logprobs=[])

    def close_message(self) -> list[ServerSentEvent]:
        if self.text is None:
            return []
        part = {"type": "output_text", "text": self.text, "annotations": []}
        item = {
            "id": self._item_id,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
        done = [
            self.event("response.output_text.done", **self._where, text=self.text, logprobs=[]),
            self.event("response.content_part.done", **self._where, part=part),
            self.event("response.output_item.done", output_index=len(self.items), item=item),
        ]
        self.items.append(item)
        self.text = None
        return done

    def add_item(self, item: dict[str, Any]) -> list[ServerSentEvent]:
        at = len(self.items)
        self.items.append(item)
        return [
            self.event("response.output_item.added", output_index=at, item=item),
            self.event("response.output_item.done", output_index=at, item=item),
        ]


async def response_events(
    ident: str,
    steps: AsyncIterator[Any],
    whole: Callable[[Reply, list[dict[str, Any]], str], dict[str, Any]],
) -> AsyncIterator[ServerSentEvent]:
    """The stream of one response. ``whole(reply, output, status)``: the response
    object, with these output items and this status."""
    stream = _Stream(ident)
    started = whole(Reply(), [], "in_progress")
    yield stream.event("response.created", response=started)
    yield stream.event("response.in_progress", response=started)
    reply = Reply()
    async for step in steps:
        if isinstance(step, Reply):
            reply = step
        elif isinstance(step, ModelStarted):
            for event in stream.close_message():
                yield event
        elif isinstance(step, TextDelta):
            if stream.text is None:
                for event in stream.open_message():
                    yield event
            yield stream.delta(step.text)
        elif isinstance(step, HostedToolUsed):
            for event in stream.add_item(hosted_item(step)):
                yield event
    for event in stream.close_message():
        yield event
    for pending in reply.pending:
        item = {
            "type": "mcp_approval_request",
            "id": pending.approval_id,
            "name": pending.tool_name,
            "arguments": pending.arguments,
            "server_label": "durable-agent",
        }
        for event in stream.add_item(item):
            yield event
    if reply.ended is not None:
        failed = whole(reply, stream.items, "failed")
        failed["error"] = {"code": "session_ended", "message": f"the session ended: {reply.ended}"}
        yield stream.event("response.failed", response=failed)
        return
    yield stream.event("response.completed", response=whole(reply, stream.items, "completed"))


def hosted_item(call: HostedCall | HostedToolUsed) -> dict[str, Any]:
    """A hosted tool's call as the Responses API's own item of it (``web_search_call``)."""
    return {"type": f"{call.name}_call", "id": call.id, "status": call.status}


class ResponsesRequest(BaseModel):
    """What is read of a request; sampling settings are the agent's spec's."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1)
    input: str | list[dict[str, Any]]
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None
    instructions: str | None = None
    tools: list[Any] | None = None
    stream: bool = False


def responses_routes(gateway: GatewayContext, named: Mapping[str, AgentSpec]) -> list[Route]:
    agents = gateway.agents

    async def create(request: Request) -> Response:
        body = parse_json(await request.body(), ResponsesRequest)
        for refused in ("tools", "instructions"):
            if getattr(body, refused):
                raise HttpError(
                    400, f"{refused}: the agent's spec decides them; send none", refused
                )
        spec = agent_for(gateway, named, body.model)
        owner = gateway.owner_of(request)
        users, decisions = _input(body.input)
        conversation = _conversation_id(body.conversation)
        if conversation is not None:
            session_id: str | None = await gateway.conversation(request, conversation)
        elif body.previous_response_id is not None:
            session_id, _ = parse_id(body.previous_response_id)
            await gateway.session(request, session_id)
        else:
            session_id = None
        if session_id is None:
            if decisions or not users:
                raise HttpError(
                    400, "input: a new conversation begins with a user message", "input"
                )
            session_id = f"session-{uuid.uuid4().hex[:12]}"
            await agents.start(
                spec, users[-1], session_id=session_id, history=users[:-1], owner=owner
            )
            after, before = -1, 0
        else:
            after = await gateway.offset(session_id)
            if after < 0 and body.previous_response_id is not None:
                raise SessionNotFoundError(session_id)
            status = await agents.session(session_id).status() if after >= 0 else None
            answering = _sent_again(body, session_id, users, decisions, status)
            if status is not None and answering is not None:  # decided already: read it
                steps = await _again(gateway, session_id, after, answering, status)
                return await _answer(body, session_id, answering, conversation, steps)
            # counted before deciding: an answer quick enough to land before the count
            # would otherwise not be more than it
            before = status.message_count if status is not None else 0
            for approval_id, approve, reason in decisions:
                await gateway.decide(request, session_id, approval_id, approve, reason=reason)
            for message in users:
                before = (await agents.converse(session_id, message, spec, owner=owner)).before
        steps = follow_reply(gateway, session_id, after, before)
        return await _answer(body, session_id, before, conversation, steps)

    async def retrieve(request: Request) -> Response:
        session_id, before = parse_id(request.path_params["response_id"])
        await gateway.session(request, session_id)
        reply = await answered(agents, session_id, before)
        pending = (await agents.session(session_id).status()).pending_approvals
        reply.pending = pending
        return JSONResponse(_response(session_id, before, "durable-agent", reply))

    return [
        Route("/v1/responses", openai_errors(create), methods=["POST"]),
        Route("/v1/responses/{response_id}", openai_errors(retrieve)),
    ]


async def _answer(
    body: ResponsesRequest,
    session_id: str,
    before: int,
    conversation: str | None,
    steps: AsyncIterator[LiveEvent | Reply],
) -> Response:
    """The response ``steps`` lead to: streamed as OpenAI's events, or whole."""
    whole = functools.partial(
        _response, session_id, before, body.model, body=body, conversation=conversation
    )
    if body.stream:

        def shaped(reply: Reply, output: list[dict[str, Any]], status: str) -> dict[str, Any]:
            return whole(reply, output=output, status=status)

        events = response_events(response_id(session_id, before), steps, shaped)
        return EventSourceResponse(events, sep="\n", ping=15)
    reply: Reply | None = None
    async for step in steps:
        if isinstance(step, Reply):
            reply = step
    if reply is None:  # the gateway is stopping: another replica answers it again
        raise HttpError(503, "the session's event stream ended before its answer")
    if reply.ended is not None:
        raise HttpError(502, f"the session ended: {reply.ended}")
    return JSONResponse(whole(reply))


def _sent_again(
    body: ResponsesRequest,
    session_id: str,
    users: list[UserMessage],
    decisions: list[Decision],
    status: SessionStatus | None,
) -> int | None:
    """The message a request sent again answers (the ``before`` of its
    ``previous_response_id``), when it is one: it only answers calls of that
    response's session, and none of them waits any more (decided by this request
    before a disconnect, or by a person elsewhere). ``None``: a request to act on."""
    if status is None or users or not decisions or body.previous_response_id is None:
        return None
    previous, before = parse_id(body.previous_response_id)
    waiting = {p.approval_id for p in status.pending_approvals}
    if previous != session_id or any(d[0] in waiting for d in decisions):
        return None
    return before


async def _again(
    gateway: GatewayContext, session_id: str, after: int, before: int, status: SessionStatus
) -> AsyncIterator[LiveEvent | Reply]:
    """The answer to a request sent again, as ``GET /v1/responses/{id}`` reads it,
    followed to its end while the session is still at work on it (``status`` was read
    after ``after``: that end is in the log from there)."""
    if status.phase not in _AT_REST:
        return follow_reply(gateway, session_id, after, before)
    reply = await answered(gateway.agents, session_id, before)
    reply.pending = status.pending_approvals
    return answer_now(reply)


#: Phases in which a session does nothing until a message or a decision comes.
_AT_REST = ("idle", "awaiting_approval", "done", "failed")


def response_id(session_id: str, before: int) -> str:
    """A response's id: its session and the message it answers."""
    token = base64.urlsafe_b64encode(session_id.encode()).decode().rstrip("=")
    return f"resp_{token}.{before}"


def parse_id(ident: str) -> tuple[str, int]:
    token, _, number = ident.removeprefix("resp_").rpartition(".")
    try:
        session_id = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        return session_id, int(number)
    except ValueError:
        raise HttpError(404, f"no response {ident!r} here", "previous_response_id") from None


def _conversation_id(given: str | dict[str, Any] | None) -> str | None:
    if isinstance(given, dict):
        found = given.get("id")
        if not isinstance(found, str):
            raise HttpError(400, 'conversation: {"id": ...} or an id', "conversation")
        return found
    return given


Decision = tuple[str, bool, str | None]
"""An approval answered: its id, approved or not, and why."""


def _input(given: str | list[dict[str, Any]]) -> tuple[list[UserMessage], list[Decision]]:
    """The user messages and the approval answers a request brings."""
    if isinstance(given, str):
        return [UserMessage(content=given)], []
    users: list[UserMessage] = []
    decisions: list[Decision] = []
    for k, item in enumerate(given):
        kind = item.get("type", "message")
        if kind == "mcp_approval_response":
            approval_id, approve = item.get("approval_request_id"), item.get("approve")
            if not isinstance(approval_id, str) or not isinstance(approve, bool):
                raise HttpError(
                    400, f"input.{k}: approval_request_id and approve are needed", f"input.{k}"
                )
            reason = item.get("reason")
            decisions.append((approval_id, approve, reason if isinstance(reason, str) else None))
        elif kind == "message" and item.get("role") == "user":
            users.append(UserMessage(content=_text(item.get("content"), k)))
        else:
            raise HttpError(
                400,
                f"input.{k}: user messages and mcp_approval_response only "
                "(the session keeps the rest)",
                f"input.{k}",
            )
    return users, decisions


def _text(content: Any, k: int) -> str:
    if isinstance(content, str) and content.strip():
        return content
    if isinstance(content, list):
        text = " ".join(
            p.get("text", "")
            for p in content
            if isinstance(p, dict) and p.get("type") == "input_text"
        )
        if text.strip():
            return text
    raise HttpError(400, f"input.{k}: a user message with text", f"input.{k}")


def _response(
    session_id: str,
    before: int,
    model: str,
    reply: Reply,
    *,
    body: ResponsesRequest | None = None,
    conversation: str | None = None,
    output: list[dict[str, Any]] | None = None,
    status: str = "completed",
) -> dict[str, Any]:
    """The response object: ``output`` as given (a stream's items), else the answer's
    text and the calls waiting for a person."""
    ident = response_id(session_id, before)
    if output is not None:
        return _envelope(ident, model, reply, output, status, body, conversation, session_id)
    output = [hosted_item(call) for call in reply.hosted]
    if reply.text:
        output.append(
            {
                "type": "message",
                "id": f"msg_{ident[5:]}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for p in reply.pending:
        output.append(
            {
                "type": "mcp_approval_request",
                "id": p.approval_id,
                "name": p.tool_name,
                "arguments": p.arguments,
                "server_label": "durable-agent",
            }
        )
    return _envelope(ident, model, reply, output, status, body, conversation, session_id)


def _envelope(
    ident: str,
    model: str,
    reply: Reply,
    output: list[dict[str, Any]],
    status: str,
    body: ResponsesRequest | None,
    conversation: str | None,
    session_id: str,
) -> dict[str, Any]:
    usage = reply.usage
    return {
        "id": ident,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": {
            "input_tokens": usage.prompt_tokens or 0,
            "output_tokens": usage.completion_tokens or 0,
            "total_tokens": usage.total_tokens or 0,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
        "previous_response_id": body.previous_response_id if body else None,
        "conversation": {"id": conversation} if conversation else None,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "durable_agent": {"session_id": session_id},
    }
