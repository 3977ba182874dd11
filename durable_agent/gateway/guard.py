"""Who may use the gateway, and from where: every request passes this guard first.

A browser lets any page send requests to any address it can reach, a loopback one
included, and DNS can point a foreign name at 127.0.0.1. So the guard answers only the
hosts it serves (``Host``), refuses cross-site requests (``Origin``) and anything but
JSON bodies (which a plain HTML form cannot send), caps bodies, keeps the console out
of frames, and, when tokens are configured, requires a bearer token naming the user.
Without tokens the gateway serves loopback only and says so.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durable_agent.approver_tokens import ApproverKey
from durable_agent.gateway.identity import USER_NAME, JwksVerifier, signing_keys_from_environment

#: Largest request body the gateway reads (a message is capped lower by the session).
MAX_BODY_BYTES = 1_000_000
#: Paths answered without a token: the console page (it asks for one) and the health check.
OPEN_PATHS = frozenset({"/", "/healthz"})
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
SECURITY_HEADERS = [
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class AccessError(ValueError):
    """Access settings that cannot be used (a bad token list, auth-less on a network)."""


@dataclass(frozen=True)
class GatewayAccess:
    """``tokens``: bearer token -> user; ``admins``: users who see and act on every
    session; ``hosts``: the host names served (a ``Host`` naming another is refused:
    DNS rebinding); ``origins``: browser origins besides the gateway's own."""

    tokens: Mapping[str, str] = field(default_factory=dict)
    admins: Collection[str] = ()
    hosts: Collection[str] = LOOPBACK_NAMES
    origins: Collection[str] = ()
    max_body: int = MAX_BODY_BYTES
    jwks: JwksVerifier | None = None
    """An identity provider's keys: bearer JWTs it signed name their user."""
    signing_keys: Mapping[str, ApproverKey] = field(default_factory=dict)
    """Approver keys by user: their decisions are signed as theirs."""
    proxies: Collection[str] = ()
    """Addresses of proxies that authenticate users themselves: from them (only), the
    ``user_header`` names the user."""
    user_header: str = "x-forwarded-user"

    @property
    def authenticated(self) -> bool:
        return bool(self.tokens) or self.jwks is not None or bool(self.proxies)

    @classmethod
    def from_environment(
        cls, host: str, more_hosts: Collection[str] = (), origins: Collection[str] = ()
    ) -> GatewayAccess:
        """``DURABLE_AGENT_GATEWAY_TOKENS`` (``user=token,...``) and
        ``DURABLE_AGENT_GATEWAY_ADMINS`` (``user,...``); without tokens, ``host`` must
        be a loopback address."""
        tokens: dict[str, str] = {}
        for item in filter(None, os.environ.get("DURABLE_AGENT_GATEWAY_TOKENS", "").split(",")):
            user, _, token = item.strip().partition("=")
            if not user or not set(user) <= USER_NAME or len(token) < 16:
                raise AccessError(
                    "DURABLE_AGENT_GATEWAY_TOKENS: user=token pairs, a user of letters, digits "
                    "and _.-@, a token of at least 16 characters"
                )
            tokens[token] = user
        admins = [a for a in os.environ.get("DURABLE_AGENT_GATEWAY_ADMINS", "").split(",") if a]
        try:
            jwks = JwksVerifier.from_environment()
            keys = signing_keys_from_environment()
        except (ValueError, OSError) as error:
            raise AccessError(str(error)) from None
        proxies = [p for p in os.environ.get("DURABLE_AGENT_GATEWAY_PROXIES", "").split(",") if p]
        header = os.environ.get("DURABLE_AGENT_GATEWAY_USER_HEADER", "X-Forwarded-User").lower()
        if not tokens and jwks is None and not proxies and not _loopback(host):
            raise AccessError(
                f"without DURABLE_AGENT_GATEWAY_TOKENS the gateway serves loopback only, not "
                f"{host}: anyone who can reach it could start sessions and approve their calls"
            )
        names = {host, *LOOPBACK_NAMES} if _loopback(host) else {host}
        return cls(
            tokens=tokens, admins=admins, hosts=names | set(more_hosts), origins=origins,
            jwks=jwks, signing_keys=keys, proxies=proxies, user_header=header,
        )  # fmt: skip

    def user_for(self, token: str) -> str | None:
        """The user a bearer token names (a configured token, else one the identity
        provider signed), or ``None``."""
        for known, user in self.tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return user
        return self.jwks.user(token) if self.jwks is not None else None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class GuardMiddleware:
    """The checks, in order: host, origin, body (type and size), token. The user is
    put in ``scope["state"]["user"]`` (``None`` without authentication)."""

    def __init__(self, app: ASGIApp, access: GatewayAccess) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        path: str = scope["path"]
        secure = _with_headers(send)
        if path.startswith("/codec/"):  # the codec endpoint has its own origins and token
            await self.app(scope, receive, secure)
            return
        problem = self._refusal(scope, headers)
        if problem is not None:
            await _answer(secure, *problem)
            return
        body = b""
        sends_body = scope["method"] in ("POST", "PUT", "PATCH") or (
            scope["method"] == "DELETE"
            and (headers.get("content-length", "0") != "0" or "transfer-encoding" in headers)
        )
        if sends_body:
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                await _answer(secure, 415, "send the body as application/json", "Content-Type")
                return
            body, whole = await _read(receive, self.access.max_body)
            if not whole:
                await _answer(secure, 413, f"body over {self.access.max_body} bytes")
                return
        user = None
        if self.access.authenticated and path not in OPEN_PATHS:
            # an identity provider's keys may need fetching: off the event loop
            user = await asyncio.to_thread(self._user, scope, headers)
            if user is None:
                await _answer(secure, 401, "a bearer token is required", "Authorization",
                              extra=[(b"www-authenticate", b"Bearer")])  # fmt: skip
                return
        scope.setdefault("state", {})["user"] = user
        await self.app(scope, _replay(body, receive) if body else receive, secure)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str] | None:
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in self.access.hosts:
            return 400, f"this gateway does not serve host {host!r}", "Host"
        origin = headers.get("origin")
        scheme = scope.get("scheme", "http")
        if (
            origin is not None
            and origin != f"{scheme}://{host}"
            and origin not in self.access.origins
        ):
            return 403, f"requests from {origin} are not allowed", "Origin"
        return None

    def _user(self, scope: Scope, headers: dict[str, str]) -> str | None:
        client = scope.get("client")
        if client and client[0] in self.access.proxies:  # the proxy vouches for the user
            named = headers.get(self.access.user_header, "")
            return named if named and set(named) <= USER_NAME else None
        token = headers.get("authorization", "")
        if token.lower().startswith("bearer "):
            return self.access.user_for(token[7:].strip())
        # an EventSource cannot send headers: the event stream takes the token as a
        # query parameter (GET only, so it never rides on a state change)
        if scope["method"] == "GET" and scope["path"].endswith("/events"):
            query = scope.get("query_string", b"").decode()
            for pair in query.split("&"):
                name, _, value = pair.partition("=")
                if name == "access_token" and value:
                    return self.access.user_for(value)
        return None


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
        await send(message)

    return sending


async def _read(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The body, and whether it fit ``limit``."""
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", False
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks), True


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replaying() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replaying


async def _answer(
    send: Send, status: int, error: str, field: str | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:  # fmt: skip
    body: dict[str, Any] = {"error": error, **({"field": field} if field else {})}
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status,
                "headers": headers + (extra or [])})  # fmt: skip
    await send({"type": "http.response.body", "body": data})
