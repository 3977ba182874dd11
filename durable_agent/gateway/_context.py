"""What a compatible endpoint of the gateway needs from it: the client, the sessions' live
events, who is calling, which spec new sessions run, decisions signed as the caller,
and the one check of who may see and act on a session.

Every entry point (the REST API, conversations, the event stream, AG-UI, the OpenAI-compatible
endpoints, the codec endpoint) asks ``session`` or ``conversation`` before it reads or
changes anything: a session is the caller's when its memo names the caller as its
owner, or when the caller is an admin. A session the caller may not see answers as if
it did not exist (404), so its id proves nothing either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

from durable_agent._client._client import AgentClient
from durable_agent._client._types import SessionNotFoundError
from durable_agent._contracts._approver_tokens import ApproverKey
from durable_agent._spec._spec import AgentSpec

from ._guard import GatewayAccess
from ._http_common import conversation_session, legacy_conversation_session
from ._hub import Hubs
from ._identity import Principal


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
