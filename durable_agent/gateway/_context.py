"""What a compatible endpoint of the gateway needs from it: the client, the sessions' live
events, who is calling, which spec new sessions run, decisions signed as the caller,
and the one check of who may see and act on a session.

Every entry point (the REST API, conversations, the event stream, AG-UI, the OpenAI-compatible
endpoints, the codec endpoint) asks ``session`` or ``conversation`` before it reads or
changes anything: a session is the caller's when its memo names the caller as its
owner, or when the caller is an admin. A session the caller may not see answers as if
it did not exist (404), so its id proves nothing either.

Below it: what every entry point shares (HTTP errors that name the field, request bodies
read strictly, errors as JSON, the conversation id rule), and the hub that shares one
reader of a session's event log among a gateway process's followers.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._client.results import (
    DecisionRefusedError,
    MessageRefusedError,
    NoWorkerError,
    SessionClosedError,
    SessionExistsError,
    SessionNotFoundError,
    UnknownApprovalError,
)
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.approvals import ApproverKey
from durable_agent._contracts.events import LiveEvent
from durable_agent._errors import DurableAgentError
from durable_agent._spec.document import AgentSpec

from ._guard import GatewayAccess, Principal

# What every entry point of the gateway shares: HTTP errors that name the field, request
# bodies read strictly, client and Temporal errors as 4xx/5xx JSON, and the rule that
# maps a conversation id to its session.

CONVERSATION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
#: Most sessions or messages one page may ask for.
MAX_LIMIT = 1000


class HttpError(DurableAgentError):
    def __init__(self, status: int, error: str, field: str | None = None) -> None:
        super().__init__(error)
        self.status, self.error, self.field = status, error, field


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: Separates the parts of a conversation's session id: in no source, user name or
#: conversation id, so two principals' conversations never share one.
PART = "~"


def conversation_session(conversation_id: str, principal: Principal | None = None) -> str:
    """The session a principal's conversation id maps to:
    ``conversation-SOURCE~NAME~ID`` (``conversation-ID`` on a gateway without users)."""
    if not CONVERSATION_ID.match(conversation_id):
        raise HttpError(400, "a conversation id is 1-128 of A-Z a-z 0-9 _ . : -", "conversation_id")
    if principal is None:
        return f"conversation-{conversation_id}"
    return f"conversation-{principal.source}{PART}{principal.name}{PART}{conversation_id}"


def legacy_conversation_session(conversation_id: str, principal: Principal) -> str:
    """The id the conversation's session had before principals (``conversation-NAME-ID``,
    which two users could share: only its memo says whose it is)."""
    return f"conversation-{principal.name}-{conversation_id}"


async def read_body(request: Request, model: type[Body]) -> Any:
    return parse_json(await request.body() or b"{}", model)


ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_json(raw: bytes, model: type[ModelT]) -> ModelT:
    """A request body as ``model``; a 400 naming the first field that is wrong."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise HttpError(400, f"{field or 'body'}: {first['msg']}", field) from None


def int_param(
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


def json_errors(handler: Handler) -> Handler:
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
            SessionClosedError,
            SessionExistsError,
            MessageRefusedError,
            DecisionRefusedError,
        ) as error:
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


# One reader of a session's event log per gateway process, shared by every browser
# that follows the session there: 100 open tabs cost the server one poll query per
# interval, not 100. Transient (a cache, not state): it goes when its last reader does.

#: Events a hub keeps for readers that join late (older ones read the log themselves).
HUB_EVENTS = 5000


class SessionHub:
    def __init__(self, agents: AgentClient, session_id: str, after: int) -> None:
        self.first = after
        self.readers = 0
        self._events: list[LiveEvent] = []
        self._offsets: list[int] = []
        self._changed = asyncio.Condition()
        self._done = False
        self.error: Exception | None = None
        self._task = asyncio.create_task(self._pump(agents, session_id))

    async def _pump(self, agents: AgentClient, session_id: str) -> None:
        try:
            async for event in agents.session(session_id).follow(after=self.first):
                self._events.append(event)
                self._offsets.append(event.offset)
                if len(self._events) > HUB_EVENTS:
                    drop = len(self._events) - HUB_EVENTS
                    self.first = self._offsets[drop - 1]
                    del self._events[:drop], self._offsets[:drop]
                async with self._changed:
                    self._changed.notify_all()
        except Exception as error:  # readers see it, and the hub is rebuilt next time
            self.error = error
        finally:
            self._done = True
            async with self._changed:
                self._changed.notify_all()

    def covers(self, after: int) -> bool:
        return after >= self.first and self.error is None

    async def read(self, after: int) -> AsyncIterator[LiveEvent]:
        while True:
            start = bisect.bisect_right(self._offsets, after)
            fresh = self._events[start:]
            for event in fresh:
                yield event
                after = event.offset
            if self.error is not None:
                raise self.error
            if self._done and not fresh:
                return
            async with self._changed:
                await self._changed.wait_for(self._newer_than(after))

    def _newer_than(self, seen: int) -> Callable[[], bool]:
        return lambda: self._done or bool(self._offsets and self._offsets[-1] > seen)

    async def close(self) -> None:
        """Stop reading the log; readers get what they have not yet, then their end."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class Hubs:
    """The gateway's hubs by session id."""

    def __init__(self, agents: AgentClient) -> None:
        self._agents = agents
        self._hubs: dict[str, SessionHub] = {}
        self._stopped = False

    async def stop(self) -> None:
        """End every reader's stream (the gateway is stopping): each response then
        completes, so the server can close its connections at once instead of cutting
        them; a reader resumes from its last offset, on this gateway or another."""
        self._stopped = True
        hubs = list(self._hubs.values())
        self._hubs.clear()
        for hub in hubs:
            await hub.close()

    async def follow(self, session_id: str, after: int) -> AsyncIterator[LiveEvent]:
        if self._stopped:
            return
        shared = self._hubs.get(session_id)
        if shared is not None and shared.covers(after):
            hub = shared
        else:  # the first reader here, or one the shared hub cannot serve: its own hub
            hub = SessionHub(self._agents, session_id, after)
            if shared is None:
                self._hubs[session_id] = hub
        hub.readers += 1
        try:
            async for event in hub.read(after):
                yield event
        finally:
            hub.readers -= 1
            if hub.readers == 0:
                if self._hubs.get(session_id) is hub:
                    del self._hubs[session_id]
                await hub.close()


@dataclass(frozen=True)
class GatewayContext:
    agents: AgentClient
    hubs: Hubs
    access: GatewayAccess
    needs_spec: Callable[[str | None], AgentSpec]
    """The spec a new session runs: the named agent's, else the gateway's own (an
    ``HttpError`` when there is none)."""

    @staticmethod
    def principal_of(request: Request) -> Principal | None:
        """The authenticated caller (``None`` on a gateway without users)."""
        found = getattr(request.state, "principal", None)
        return found if isinstance(found, Principal) else None

    @staticmethod
    def owner_of(request: Request) -> str | None:
        """What a session the caller starts records as its owner (memo ``owner``)."""
        principal = GatewayContext.principal_of(request)
        return None if principal is None else str(principal)

    def sees_everything(self, principal: Principal | None) -> bool:
        """A gateway without users (loopback only) shows every session to its callers;
        an admin sees every session of a gateway with users."""
        return not self.access.authenticated or self.access.is_admin(principal)

    def may_see(self, principal: Principal | None, owner: str | None) -> bool:
        """The rule itself: may ``principal`` see and act on a session owned by ``owner``."""
        if self.sees_everything(principal):
            return True
        return principal is not None and principal.owns(owner)

    async def session(self, request: Request, session_id: str) -> str:
        """``session_id``, when the caller may see it (``SessionNotFoundError``, a 404,
        as if absent, if not)."""
        principal = self.principal_of(request)
        if self.sees_everything(principal):
            return session_id
        if not self.may_see(principal, await self.agents.session(session_id).owner()):
            raise SessionNotFoundError(session_id)
        return session_id

    async def conversation(self, request: Request, conversation_id: str) -> str:
        """The session of the caller's conversation ``conversation_id``: its own id (no one
        else's conversation has it), checked as any session when it exists, running or
        ended. A conversation begun before principals keeps its old id while its owner
        goes on with it."""
        principal = self.principal_of(request)
        session_id = conversation_session(conversation_id, principal)
        try:
            owner = await self.agents.session(session_id).owner()
        except SessionNotFoundError:
            return await self._earlier(principal, conversation_id) or session_id
        if not self.may_see(principal, owner):
            raise SessionNotFoundError(session_id)
        return session_id

    async def _earlier(self, principal: Principal | None, conversation_id: str) -> str | None:
        """The caller's conversation under the id it had before principals, when it
        exists and its memo names the caller (never another user's whose name the
        old id ran into)."""
        if principal is None:
            return None
        earlier = legacy_conversation_session(conversation_id, principal)
        try:
            owner = await self.agents.session(earlier).owner()
        except SessionNotFoundError:
            return None
        return earlier if owner == principal.name else None

    async def offset(self, session_id: str) -> int:
        """Where the session's events are now (``-1``: no such session yet): a reply is
        followed from here, read before anything is sent so that none is missed."""
        try:
            return await self.agents.session(session_id).latest_offset()
        except SessionNotFoundError:
            return -1

    def decided_by(self, request: Request, said: str | None) -> str | None:
        """Who decides: the authenticated principal's name (a body cannot speak for
        another)."""
        principal = self.principal_of(request)
        return principal.name if self.access.authenticated and principal else said

    async def decide(
        self,
        request: Request,
        session_id: str,
        approval_id: str,
        approve: bool,
        *,
        by: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Approve or deny, as the caller: signed with their key when the gateway has
        users (a name in a body never picks a key)."""
        decider, key = self._decider(request, by)
        session = self.agents.session(session_id)
        gateway = session.approve if approve else session.deny
        await gateway(approval_id, by=decider, reason=reason, key=key)

    async def commit_output(
        self,
        request: Request,
        session_id: str,
        approval_id: str,
        content: str,
        *,
        is_error: bool = False,
        by: str | None = None,
    ) -> None:
        """Give the output of a call whose tool takes it from outside, as the caller
        (the same people, and the same signature, as a decision)."""
        decider, key = self._decider(request, by)
        await self.agents.session(session_id).commit_tool_output(
            approval_id, content, is_error=is_error, by=decider, key=key
        )

    def _decider(self, request: Request, by: str | None) -> tuple[str | None, ApproverKey | None]:
        """Who decides, and the key their decision is signed with when the gateway has
        users (a name in a body never picks a key)."""
        principal = self.principal_of(request)
        access = self.access
        key = access.signing_keys.get(principal) if access.authenticated and principal else None
        return self.decided_by(request, by), key
