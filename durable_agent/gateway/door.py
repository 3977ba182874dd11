"""What a front door of the gateway needs from it: the client, the sessions' live
events, who is calling, which spec new sessions run, and decisions signed as the
caller. The REST API, the AG-UI endpoint and the OpenAI-compatible endpoints each
take one ``Door``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

from durable_agent.client import AgentClient, SessionNotFoundError
from durable_agent.gateway.guard import GatewayAccess
from durable_agent.gateway.hub import Hubs
from durable_agent.spec import AgentSpec


@dataclass(frozen=True)
class Door:
    agents: AgentClient
    hubs: Hubs
    access: GatewayAccess
    needs_spec: Callable[[str | None], AgentSpec]
    """The spec a new session runs: the named agent's, else the gateway's own (an
    ``HttpError`` when there is none)."""

    @staticmethod
    def user_of(request: Request) -> str | None:
        """The authenticated caller (``None`` on a gateway without users)."""
        return getattr(request.state, "user", None)

    async def visible(self, request: Request, session_id: str) -> str:
        """``session_id``, when the caller may see it (404 as if absent if not)."""
        user = self.user_of(request)
        mine = not self.access.authenticated or user in self.access.admins
        if not mine and await self.agents.owner(session_id) != user:
            raise SessionNotFoundError(session_id)
        return session_id

    async def offset(self, session_id: str) -> int:
        """Where the session's events are now (``-1``: no such session yet): a reply is
        followed from here, read before anything is sent so that none is missed."""
        try:
            return await self.agents.latest_offset(session_id)
        except SessionNotFoundError:
            return -1

    def decided_by(self, request: Request, said: str | None) -> str | None:
        """Who decides: the authenticated user (a body cannot speak for another)."""
        return self.user_of(request) if self.access.authenticated else said

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
        decider = self.decided_by(request, by)
        access = self.access
        key = access.signing_keys.get(decider) if access.authenticated and decider else None
        door = self.agents.approve if approve else self.agents.deny
        await door(session_id, approval_id, by=decider, reason=reason, key=key)
