"""``durable-agent serve``: sessions over HTTP (Starlette), and the web console.

Stateless: every request goes to Temporal, so any number of replicas can run behind a
load balancer. A conversation id maps to a session id by a fixed rule, so the same
conversation reaches the same session from any replica. The event stream is SSE, in
our event types or (``format=agui``) in the AG-UI encoding; ``POST /api/agui`` is an
AG-UI agent endpoint. Bad requests get a 4xx with a JSON error naming the field.

New sessions run the operator's spec (``--spec``) or one of the operator's agents by
name (``--agents``): a request never sends a spec, since a spec says what the
workers do.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from importlib import resources
from typing import Any

from ag_ui.core import RunAgentInput
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.approval_client import DecisionRefusedError, UnknownApprovalError
from durable_agent.client import (
    AgentClient,
    MessageRefusedError,
    NoWorkerError,
    SessionClosedError,
    SessionExistsError,
    SessionNotFoundError,
)
from durable_agent.events import LiveEvent
from durable_agent.gateway.agui import AguiTranslator
from durable_agent.gateway.guard import GatewayAccess, GuardMiddleware
from durable_agent.gateway.hub import Hubs
from durable_agent.messages import dump_messages
from durable_agent.spec import AgentSpec

CONVERSATION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
#: Most sessions or messages one page may ask for.
MAX_LIMIT = 1000


class HttpError(Exception):
    def __init__(self, status: int, error: str, field: str | None = None) -> None:
        super().__init__(error)
        self.status, self.error, self.field = status, error, field


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StartBody(_Body):
    """A new session (its id is the gateway's to choose)."""

    message: str | None = Field(default=None, min_length=1)
    agent: str | None = Field(default=None, min_length=1, max_length=64)
    """One of the agents the gateway was served with (``--agents``), by name."""


class ForkBody(StartBody):
    """A branch of a session: its first ``at`` messages, then ``message`` if given."""

    at: int = Field(ge=1)


class MessageBody(_Body):
    text: str = Field(min_length=1)


class DecisionBody(_Body):
    by: str | None = Field(default=None, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)


def session_for_conversation(conversation_id: str, user: str | None = None) -> str:
    """The session a conversation id maps to (each user's conversations apart)."""
    if not CONVERSATION_ID.match(conversation_id):
        raise HttpError(400, "a conversation id is 1-128 of A-Z a-z 0-9 _ . : -", "conversation_id")
    return f"conversation-{user}-{conversation_id}" if user else f"conversation-{conversation_id}"


async def read_body(request: Request, model: type[_Body]) -> Any:
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise HttpError(400, f"{field or 'body'}: {first['msg']}", field) from None


def _int_param(
    request: Request, name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise HttpError(400, f"{name}: not an integer: {text!r}", name) from None
    if value < minimum:
        raise HttpError(400, f"{name}: must be at least {minimum}", name)
    if maximum is not None and value > maximum:
        raise HttpError(400, f"{name}: must be at most {maximum}", name)
    return value


Handler = Callable[[Request], Awaitable[Response]]


def _errors(handler: Handler) -> Handler:
    """Client errors as 4xx JSON; what the session refused says why."""

    async def handle(request: Request) -> Response:
        try:
            return await handler(request)
        except HttpError as error:
            body = {"error": error.error, **({"field": error.field} if error.field else {})}
            return JSONResponse(body, status_code=error.status)
        except SessionNotFoundError as error:
            return JSONResponse({"error": str(error)}, status_code=404)
        except UnknownApprovalError as error:
            return JSONResponse({"error": str(error), "field": "approval_id"}, status_code=404)
        except (
            SessionClosedError, SessionExistsError, MessageRefusedError, DecisionRefusedError
        ) as error:  # fmt: skip
            return JSONResponse({"error": str(error)}, status_code=409)
        except NoWorkerError as error:
            return JSONResponse({"error": str(error)}, status_code=503)
        except RPCError as error:  # Temporal's answer, in the gateway's words and codes
            status = RPC_STATUS.get(error.status, 503)
            return JSONResponse({"error": f"Temporal: {error.message}"}, status_code=status)

    return handle


#: Temporal's refusals as HTTP statuses (anything else: the service is unavailable).
RPC_STATUS = {
    RPCStatusCode.INVALID_ARGUMENT: 400,
    RPCStatusCode.NOT_FOUND: 404,
    RPCStatusCode.ALREADY_EXISTS: 409,
    RPCStatusCode.FAILED_PRECONDITION: 409,
    RPCStatusCode.PERMISSION_DENIED: 403,
    RPCStatusCode.RESOURCE_EXHAUSTED: 429,
}


def create_app(
    agents: AgentClient,
    spec: AgentSpec | None,
    named: Mapping[str, AgentSpec] | None = None,
    codec: list[Route] | None = None,
    access: GatewayAccess | None = None,
) -> Starlette:
    """The gateway: new sessions run ``spec``, or one of the ``named`` agents' specs
    when a start names it (a request never brings a spec of its own); ``codec``: the
    Temporal UI's codec endpoint (``codec_routes``), served beside the API; ``access``:
    who may call it, from where (``GatewayAccess``; every session then belongs to the
    user who started it, and only they, or an admin, see and act on it)."""
    hubs = Hubs(agents)
    named = named or {}
    access = access or GatewayAccess()

    def user_of(request: Request) -> str | None:
        return getattr(request.state, "user", None)

    async def visible(request: Request, session_id: str) -> str:
        """``session_id``, when the caller may see it (404 as if absent if not)."""
        user = user_of(request)
        mine = not access.authenticated or user in access.admins
        if not mine and await agents.owner(session_id) != user:
            raise SessionNotFoundError(session_id)
        return session_id

    async def owned(request: Request) -> str:
        """The path's session, when the caller may see it."""
        return await visible(request, request.path_params["session_id"])

    def decided_by(request: Request, said: str | None) -> str | None:
        """Who decides: the authenticated user (a body cannot speak for another)."""
        return user_of(request) if access.authenticated else said

    def needs_spec(agent: str | None = None) -> AgentSpec:
        if agent is not None:
            found = named.get(agent)
            if found is None:
                listed = ", ".join(sorted(named)) or "none: it was served without --agents"
                raise HttpError(404, f"no agent {agent!r} here (agents: {listed})", "agent")
            return found
        if spec is None:
            raise HttpError(400, "this gateway starts no sessions: it was served without --spec")
        return spec

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def console(request: Request) -> Response:
        page = resources.files("durable_agent.gateway").joinpath("console.html").read_text()
        return HTMLResponse(page)

    async def list_sessions(request: Request) -> Response:
        limit = _int_param(request, "limit", 50, 1, MAX_LIMIT)
        found = await agents.sessions(limit=limit)
        user = user_of(request)
        if access.authenticated and user not in access.admins:
            found = [s for s in found if s.owner == user]
        return JSONResponse(
            [
                {
                    "session_id": s.session_id,
                    "status": s.status,
                    "title": s.title,
                    "started_at": s.started_at.isoformat() if s.started_at else None,
                    "forked_from": s.forked_from,
                    "forked_at": s.forked_at,
                    "version": s.version,
                }
                for s in found
            ]
        )

    async def start_session(request: Request) -> Response:
        body: StartBody = await read_body(request, StartBody)
        chosen = needs_spec(body.agent)
        session_id = await agents.start(chosen, body.message, owner=user_of(request))
        return JSONResponse({"session_id": session_id}, status_code=201)

    async def fork_session(request: Request) -> Response:
        """A branch of a session the caller may see; it belongs to the caller."""
        parent = await owned(request)
        body: ForkBody = await read_body(request, ForkBody)
        chosen = needs_spec(body.agent)
        try:
            branch = await agents.fork(parent, body.at, chosen, body.message,
                                       owner=user_of(request))  # fmt: skip
        except ValueError as error:
            raise HttpError(422, str(error), "at") from None
        return JSONResponse({"session_id": branch, "forked_from": parent, "at": body.at},
                            status_code=201)  # fmt: skip

    async def diff_sessions(request: Request) -> Response:
        """Where two sessions the caller may see part, and what each says after."""
        left = await owned(request)
        right = await visible(request, request.path_params["other"])
        found = await agents.diff(left, right)
        return JSONResponse({
            "common": found.common,
            "left": dump_messages(found.left),
            "right": dump_messages(found.right),
        })  # fmt: skip

    async def send_to_conversation(request: Request) -> Response:
        user = user_of(request)
        session_id = session_for_conversation(request.path_params["conversation_id"], user)
        body: MessageBody = await read_body(request, MessageBody)
        sent = await agents.converse(session_id, body.text, needs_spec(), owner=user)
        return JSONResponse(
            {"session_id": session_id, "before": sent.before, "queued": sent.queued},
            status_code=202,
        )

    async def send(request: Request) -> Response:
        body: MessageBody = await read_body(request, MessageBody)
        before = await agents.send(await owned(request), body.text)
        return JSONResponse({"before": before}, status_code=202)

    def decision(approve: bool) -> Handler:
        async def decide(request: Request) -> Response:
            body: DecisionBody = await read_body(request, DecisionBody)
            session_id, approval_id = await owned(request), request.path_params["approval_id"]
            door = agents.approve if approve else agents.deny
            by = decided_by(request, body.by)
            # signed as the authenticated user's (a body's name never picks a key)
            key = access.signing_keys.get(by) if access.authenticated and by else None
            await door(session_id, approval_id, by=by, reason=body.reason, key=key)
            return JSONResponse({"decided": "approved" if approve else "denied"}, status_code=202)

        return decide

    async def end(request: Request) -> Response:
        body: DecisionBody = await read_body(request, DecisionBody)
        by = decided_by(request, body.by)
        await agents.end(await owned(request), by=by, reason=body.reason)
        return JSONResponse({"ending": True}, status_code=202)

    async def messages(request: Request) -> Response:
        start = _int_param(request, "from", 0, 0)
        limit = _int_param(request, "limit", 200, 1, MAX_LIMIT)
        found = await agents.messages(await owned(request), start, limit=limit)
        return JSONResponse([m.model_dump(mode="json", exclude_none=True) for m in found])

    async def status(request: Request) -> Response:
        found = await agents.status(await owned(request))
        return JSONResponse(found.model_dump(mode="json"))

    async def events(request: Request) -> Response:
        session_id = await owned(request)
        await agents.status(session_id)  # 404 before the stream opens
        last_id = request.headers.get("last-event-id")
        after = _int_param(request, "after", -1, -1)
        if last_id is not None:
            try:
                after = int(last_id)
            except ValueError:
                raise HttpError(400, "Last-Event-ID: not an integer", "Last-Event-ID") from None
        fmt = request.query_params.get("format", "events")
        if fmt not in ("events", "agui"):
            raise HttpError(400, "format: 'events' or 'agui'", "format")
        stream = hubs.follow(session_id, after)
        if fmt == "agui":
            return EventSourceResponse(_agui(stream, AguiTranslator(session_id)), ping=15)
        return EventSourceResponse(_native(stream), ping=15)

    async def agui_run(request: Request) -> Response:
        """An AG-UI agent endpoint: the thread is the conversation; the last user
        message is sent (the session started if need be); the run's events stream
        until the session answers it."""
        try:
            run = RunAgentInput.model_validate_json(await request.body())
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            raise HttpError(400, f"{field}: {first['msg']}", field) from None
        user = user_of(request)
        session_id = session_for_conversation(run.thread_id, user)
        text = _last_user_text(run)
        try:
            after = await agents.latest_offset(session_id)
        except SessionNotFoundError:
            after = -1
        sent = await agents.converse(session_id, text, needs_spec(), owner=user)
        translator = AguiTranslator(run.thread_id, run.run_id)

        async def until_answered() -> AsyncIterator[LiveEvent]:
            async for event in hubs.follow(session_id, after):
                yield event
                if event.type == "idle" and event.message_count > sent.before:
                    return

        return EventSourceResponse(_agui(until_answered(), translator, start=True), ping=15)

    routes = [
        Route("/", console),
        Route("/healthz", healthz),
        Route("/api/sessions", _errors(list_sessions), methods=["GET"]),
        Route("/api/sessions", _errors(start_session), methods=["POST"]),
        Route("/api/sessions/{session_id}/messages", _errors(messages), methods=["GET"]),
        Route("/api/sessions/{session_id}/messages", _errors(send), methods=["POST"]),
        Route("/api/sessions/{session_id}/status", _errors(status)),
        Route("/api/sessions/{session_id}/events", _errors(events)),
        Route("/api/sessions/{session_id}/end", _errors(end), methods=["POST"]),
        Route("/api/sessions/{session_id}/fork", _errors(fork_session), methods=["POST"]),
        Route("/api/sessions/{session_id}/diff/{other}", _errors(diff_sessions)),
        Route(
            "/api/sessions/{session_id}/approvals/{approval_id:path}/approve",
            _errors(decision(True)),
            methods=["POST"],
        ),
        Route(
            "/api/sessions/{session_id}/approvals/{approval_id:path}/deny",
            _errors(decision(False)),
            methods=["POST"],
        ),
        Route(
            "/api/conversations/{conversation_id}/messages",
            _errors(send_to_conversation),
            methods=["POST"],
        ),
        Route("/api/agui", _errors(agui_run), methods=["POST"]),
        *(codec or []),
    ]
    return Starlette(routes=routes, middleware=[Middleware(GuardMiddleware, access=access)])


def _last_user_text(run: RunAgentInput) -> str:
    for message in reversed(run.messages):
        if message.role == "user":
            content = message.content
            if isinstance(content, str):
                text = content
            else:
                text = " ".join(getattr(part, "text", "") or "" for part in content)
            if text.strip():
                return text
            break
    raise HttpError(400, "messages: the last user message has no text", "messages")


async def _native(stream: AsyncIterator[LiveEvent]) -> AsyncIterator[ServerSentEvent]:
    async for event in stream:
        data = event.model_dump_json(exclude_none=True)
        yield ServerSentEvent(data=data, id=str(event.offset), event=event.type)


async def _agui(
    stream: AsyncIterator[LiveEvent], translator: AguiTranslator, *, start: bool = False
) -> AsyncIterator[ServerSentEvent]:
    if start:
        first = translator.open_run()
        yield ServerSentEvent(data=first.model_dump_json(by_alias=True, exclude_none=True))
    async for event in stream:
        for out in translator.translate(event):
            data = out.model_dump_json(by_alias=True, exclude_none=True)
            yield ServerSentEvent(data=data, id=str(event.offset))
