"""``durable-agent serve``: sessions over HTTP (Starlette), and the web console.

Stateless: every request goes to Temporal, so any number of replicas can run behind a
load balancer. A conversation id maps to a session id by a fixed rule, so the same
conversation reaches the same session from any replica. The event stream is SSE, in
our event types or (``format=agui``) in the AG-UI encoding. The other compatible endpoints are
modules of their own, given the same ``Entry point``: ``POST /api/agui`` (``agui_endpoint``),
``POST /api/ai-sdk/chat`` (``_ai_sdk``), the OpenAI-compatible ``/v1`` endpoints
(``openai_chat``, ``openai_responses``) and A2A (``/a2a``, ``_a2a``).
Bad requests get a 4xx with a JSON error naming the field.

New sessions run the operator's spec (``--spec``) or one of the operator's agents by
name (``--agents``): a request never sends a spec, since a spec says what the
workers do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from importlib import resources

from pydantic import Field
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.events import LiveEvent
from durable_agent._payloads.encryption import EncryptionCodec
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import dump_messages
from durable_agent.capabilities._memory import Memory

from ._a2a import a2a_routes
from ._agui import AguiTranslator, agui_routes, agui_sse
from ._ai_sdk import ai_sdk_routes
from ._codec_endpoint import codec_routes
from ._context import (
    MAX_LIMIT,
    Body,
    GatewayContext,
    Handler,
    HttpError,
    Hubs,
    int_param,
    json_errors,
    read_body,
)
from ._guard import GatewayAccess, GuardMiddleware
from ._memory_routes import memory_routes
from ._openai_chat import chat_routes
from ._openai_common import whole_replies
from ._openai_responses import responses_routes
from ._wake_up_routes import wake_up_routes


class StartBody(Body):
    """A new session (its id is the gateway's to choose)."""

    message: str | None = Field(default=None, min_length=1)
    agent: str | None = Field(default=None, min_length=1, max_length=64)
    """One of the agents the gateway was served with (``--agents``), by name."""


class ForkBody(StartBody):
    """A branch of a session: its first ``at`` messages, then ``message`` if given."""

    at: int = Field(ge=1)


class MessageBody(Body):
    text: str = Field(min_length=1)


class DecisionBody(Body):
    by: str | None = Field(default=None, max_length=200)
    reason: str | None = Field(default=None, max_length=2000)


class OutputBody(Body):
    """The output of a call whose tool takes it from outside."""

    content: str
    is_error: bool = False
    by: str | None = Field(default=None, max_length=200)


def create_app(
    agents: AgentClient,
    spec: AgentSpec | None,
    named: Mapping[str, AgentSpec] | None = None,
    codec: EncryptionCodec | None = None,
    access: GatewayAccess | None = None,
    memory: Memory | None = None,
) -> Starlette:
    """The gateway: new sessions run ``spec``, or one of the ``named`` agents' specs
    when a start names it (a request never brings a spec of its own); ``codec``: the
    codec the Temporal UI decodes through (``/codec``, served beside the API); ``access``:
    who may call it, from where (``GatewayAccess``; every session then belongs to the
    principal who started it, and only they, or an admin, see and act on it); ``memory``:
    the workers' memory store, which callers read and edit in their tenant's namespaces
    (``/api/memory``)."""
    hubs = Hubs(agents)
    named = named or {}
    access = access or GatewayAccess()
    owner_of = GatewayContext.owner_of

    async def owned(request: Request) -> str:
        """The path's session, when the caller may see it."""
        return await gateway.session(request, request.path_params["session_id"])

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

    gateway = GatewayContext(agents, hubs, access, needs_spec)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def console(request: Request) -> Response:
        page = resources.files("durable_agent.gateway").joinpath("console.html").read_text()
        return HTMLResponse(page)

    async def list_sessions(request: Request) -> Response:
        limit = int_param(request, "limit", 50, 1, MAX_LIMIT)
        found = await agents.sessions(limit=limit)
        principal = GatewayContext.principal_of(request)
        found = [s for s in found if gateway.may_see(principal, s.owner)]
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
        session_id = await agents.start(chosen, body.message, owner=owner_of(request))
        return JSONResponse({"session_id": session_id}, status_code=201)

    async def fork_session(request: Request) -> Response:
        """A branch of a session the caller may see; it belongs to the caller."""
        parent = await owned(request)
        body: ForkBody = await read_body(request, ForkBody)
        chosen = needs_spec(body.agent)
        try:
            branch = await agents.session(parent).fork(
                body.at, chosen, body.message, owner=owner_of(request)
            )
        except ValueError as error:
            raise HttpError(422, str(error), "at") from None
        return JSONResponse(
            {"session_id": branch, "forked_from": parent, "at": body.at}, status_code=201
        )

    async def diff_sessions(request: Request) -> Response:
        """Where two sessions the caller may see part, and what each says after."""
        left = await owned(request)
        right = await gateway.session(request, request.path_params["other"])
        found = await agents.diff(left, right)
        return JSONResponse(
            {
                "common": found.common,
                "left": dump_messages(found.left),
                "right": dump_messages(found.right),
            }
        )

    async def send_to_conversation(request: Request) -> Response:
        session_id = await gateway.conversation(request, request.path_params["conversation_id"])
        body: MessageBody = await read_body(request, MessageBody)
        sent = await agents.converse(session_id, body.text, needs_spec(), owner=owner_of(request))
        return JSONResponse(
            {"session_id": session_id, "before": sent.before, "queued": sent.queued},
            status_code=202,
        )

    async def send(request: Request) -> Response:
        body: MessageBody = await read_body(request, MessageBody)
        before = await agents.session(await owned(request)).send(body.text)
        return JSONResponse({"before": before}, status_code=202)

    def decision(approve: bool) -> Handler:
        async def decide(request: Request) -> Response:
            body: DecisionBody = await read_body(request, DecisionBody)
            session_id, approval_id = await owned(request), request.path_params["approval_id"]
            await gateway.decide(
                request, session_id, approval_id, approve, by=body.by, reason=body.reason
            )
            return JSONResponse({"decided": "approved" if approve else "denied"}, status_code=202)

        return decide

    async def commit_output(request: Request) -> Response:
        body: OutputBody = await read_body(request, OutputBody)
        session_id, approval_id = await owned(request), request.path_params["approval_id"]
        await gateway.commit_output(
            request, session_id, approval_id, body.content, is_error=body.is_error, by=body.by
        )
        return JSONResponse({"decided": "responded"}, status_code=202)

    async def no_such_decision(request: Request) -> Response:
        """A decision path in words other than the ones a decision is given in."""
        await owned(request)
        word = request.path_params["word"]
        right = {"approved": "approve", "denied": "deny", "responded": "respond"}.get(word)
        paths = f".../{right}" if right else ".../approve, .../deny or .../respond"
        raise HttpError(
            404,
            f"no decision {word!r}: POST {paths} (a decision is given as approve, deny or "
            "respond; the answer says what became of the call: approved, denied, responded)",
            "decision",
        )

    async def end(request: Request) -> Response:
        body: DecisionBody = await read_body(request, DecisionBody)
        by = gateway.decided_by(request, body.by)
        await agents.session(await owned(request)).end(by=by, reason=body.reason)
        return JSONResponse({"ending": True}, status_code=202)

    async def messages(request: Request) -> Response:
        start = int_param(request, "from", 0, 0)
        limit = int_param(request, "limit", 200, 1, MAX_LIMIT)
        found = await agents.session(await owned(request)).messages(start, limit=limit)
        return JSONResponse([m.model_dump(mode="json", exclude_none=True) for m in found])

    async def status(request: Request) -> Response:
        found = await agents.session(await owned(request)).status()
        return JSONResponse(found.model_dump(mode="json"))

    async def events(request: Request) -> Response:
        session_id = await owned(request)
        # 404 before the stream opens, from the server: a status query would ask the
        # worker once per reader (a hundred readers of one session, a hundred queries
        # queued behind its tasks), where the hub reads the log once for all of them
        await agents.session(session_id).has_ended()
        last_id = request.headers.get("last-event-id")
        after = int_param(request, "after", -1, -1)
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
            return agui_sse(whole_replies(stream), AguiTranslator(session_id))
        return EventSourceResponse(_native(stream), ping=15)

    routes = [
        Route("/", console),
        Route("/healthz", healthz),
        Route("/api/sessions", json_errors(list_sessions), methods=["GET"]),
        Route("/api/sessions", json_errors(start_session), methods=["POST"]),
        Route("/api/sessions/{session_id}/messages", json_errors(messages), methods=["GET"]),
        Route("/api/sessions/{session_id}/messages", json_errors(send), methods=["POST"]),
        Route("/api/sessions/{session_id}/status", json_errors(status)),
        Route("/api/sessions/{session_id}/events", json_errors(events)),
        Route("/api/sessions/{session_id}/end", json_errors(end), methods=["POST"]),
        Route("/api/sessions/{session_id}/fork", json_errors(fork_session), methods=["POST"]),
        Route("/api/sessions/{session_id}/diff/{other}", json_errors(diff_sessions)),
        Route(
            "/api/sessions/{session_id}/approvals/{approval_id:path}/approve",
            json_errors(decision(True)),
            methods=["POST"],
        ),
        Route(
            "/api/sessions/{session_id}/approvals/{approval_id:path}/deny",
            json_errors(decision(False)),
            methods=["POST"],
        ),
        Route(
            "/api/sessions/{session_id}/approvals/{approval_id:path}/output",
            json_errors(commit_output),
            methods=["POST"],
        ),
        Route(  # the decision's own word, as DecisionRequest and the CLI say it
            "/api/sessions/{session_id}/approvals/{approval_id:path}/respond",
            json_errors(commit_output),
            methods=["POST"],
        ),
        Route(
            "/api/sessions/{session_id}/approvals/{approval_id:path}/{word}",
            json_errors(no_such_decision),
            methods=["POST"],
        ),
        Route(
            "/api/conversations/{conversation_id}/messages",
            json_errors(send_to_conversation),
            methods=["POST"],
        ),
        *wake_up_routes(gateway),
        *agui_routes(gateway),
        *ai_sdk_routes(gateway),
        *a2a_routes(gateway, list(named), spec is not None),
        *chat_routes(gateway, named, spec is not None),
        *responses_routes(gateway, named),
        *memory_routes(gateway, memory),
        *(codec_routes(codec, gateway) if codec is not None else []),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(GuardMiddleware, access=access)])
    app.state.stopping = hubs.stop  # ``serve_http`` ends the event streams first
    return app


async def _native(stream: AsyncIterator[LiveEvent]) -> AsyncIterator[ServerSentEvent]:
    async for event in stream:
        data = event.model_dump_json(exclude_none=True)
        yield ServerSentEvent(data=data, id=str(event.offset), event=event.type)
