"""Who may use the gateway, and from where: every request passes this guard first.

A browser lets any page send requests to any address it can reach, a loopback one
included, and DNS can point a foreign name at 127.0.0.1. So the guard answers only the
hosts it serves (``Host``), refuses cross-site requests (``Origin``) and anything but
JSON bodies (which a plain HTML form cannot send), caps bodies while reading them,
keeps the console out of frames, and, when users are configured, requires a bearer
token (in the ``Authorization`` header only: a token in a URL ends up in access logs)
naming the principal. Without users the gateway serves loopback only and says so.

The codec endpoint the Temporal UI decodes through is behind the same checks, with
its own browser origins (the UI's), a larger body limit, and CORS preflights answered
without a token (a browser sends none with them).

Who a caller is is decided here too (``Principal``): a name and where the gateway
learned it, a bearer token checked against an identity provider's published keys, and
the approver key that signs the caller's decisions.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import jwt
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from durable_agent._contracts.approvals import ApproverKey
from durable_agent._errors import DurableAgentError

# Who a gateway caller is: a principal (a name, and where the gateway learned it), a
# bearer token checked against an identity provider's published keys (JWKS), and the
# approver key the gateway signs that principal's decisions with.
#
# A name means something only together with its source: the user ``ops`` of the
# gateway's own token list and a JWT whose subject is ``ops`` are two people, and an
# admin is named with the source too (``token:ops``).
#
# The identity provider is the owner's choice (``DURABLE_AGENT_GATEWAY_JWKS_URL`` and
# the audience and issuer it must have put in the token); a token it did not sign, one
# for another audience, or an expired one names nobody. A user's decisions are signed
# with their own approver key (a folder of ``<user>.key`` files, as ``durable-agent
# approver-key`` writes them), so the workers verify them as any signed decision.

#: What a user name may hold (it becomes part of conversation session ids).
USER_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-@")
ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA"]

Source = Literal["token", "jwt", "proxy"]
"""Where the gateway learned a name: its own token list (``DURABLE_AGENT_GATEWAY_TOKENS``),
a JWT an identity provider signed, or a header an authenticating proxy set."""
SOURCES: tuple[str, ...] = get_args(Source)


class PrincipalError(DurableAgentError, ValueError):
    """Text that does not name a principal; the message says how to write one."""


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: a name and its source, written ``source:name``."""

    source: Source
    name: str

    def __str__(self) -> str:
        return f"{self.source}:{self.name}"

    @classmethod
    def parse(cls, text: str, *, bare: Source | None = None) -> Principal:
        """``source:name``; a bare ``name`` only where ``bare`` says which source it is."""
        source, colon, name = text.strip().rpartition(":")
        if not colon:
            if bare is None:
                written = " or ".join(f"{s}:{text.strip()}" for s in SOURCES)
                raise PrincipalError(f"{text!r} names no source: write {written}")
            source, name = bare, text.strip()
        if source not in SOURCES:
            raise PrincipalError(f"{text!r}: the source is one of {', '.join(SOURCES)}")
        if not name or not set(name) <= USER_NAME:
            raise PrincipalError(f"{text!r}: a name of letters, digits and _.-@")
        return cls(source, name)  # type: ignore[arg-type]

    def owns(self, owner: str | None) -> bool:
        """Whether a session whose memo names ``owner`` is this principal's. Sessions
        started before principals name a bare user: any principal of that name owns
        them, as before (a gateway with one source of users, the usual case, has no
        second person of that name)."""
        if not owner:
            return False
        return owner == str(self) if ":" in owner else owner == self.name


@dataclass(frozen=True)
class JwksVerifier:
    """Bearer JWTs signed by the keys at ``url`` (fetched once, then cached)."""

    url: str
    audience: str
    issuer: str | None = None
    claim: str = "sub"
    _client: jwt.PyJWKClient = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_client", jwt.PyJWKClient(self.url, cache_keys=True))

    @classmethod
    def from_environment(cls) -> JwksVerifier | None:
        url = os.environ.get("DURABLE_AGENT_GATEWAY_JWKS_URL")
        if not url:
            return None
        audience = os.environ.get("DURABLE_AGENT_GATEWAY_AUDIENCE")
        if not audience:
            raise ValueError("DURABLE_AGENT_GATEWAY_JWKS_URL needs DURABLE_AGENT_GATEWAY_AUDIENCE")
        return cls(
            url=url,
            audience=audience,
            issuer=os.environ.get("DURABLE_AGENT_GATEWAY_ISSUER") or None,
            claim=os.environ.get("DURABLE_AGENT_GATEWAY_USER_CLAIM") or "sub",
        )

    def user(self, token: str) -> Principal | None:
        """The principal the token names, or ``None`` when it proves nothing."""
        try:
            key = self._client.get_signing_key_from_jwt(token).key
            claims = jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", self.claim]},
            )
        except jwt.PyJWTError:
            return None
        name = claims.get(self.claim)
        if not isinstance(name, str) or not name or not set(name) <= USER_NAME:
            return None
        return Principal("jwt", name)


def signing_keys_from_environment() -> dict[Principal, ApproverKey]:
    """The approver keys in ``DURABLE_AGENT_GATEWAY_APPROVER_KEYS``, by the principal
    they sign for: a folder of ``<principal>.key`` files (``jwt:alice.key``; a bare
    ``alice.key`` is the token user ``alice``), each naming the approver it signs as.
    None when it is unset."""
    folder = os.environ.get("DURABLE_AGENT_GATEWAY_APPROVER_KEYS")
    if not folder:
        return {}
    keys = {}
    for path in sorted(Path(folder).glob("*.key")):
        try:
            principal = Principal.parse(path.stem, bare="token")
        except PrincipalError as error:
            raise ValueError(f"{path}: the file is named after a principal: {error}") from None
        keys[principal] = ApproverKey.from_file(path)
    return keys


#: Largest request body the gateway reads (a message is capped lower by the session).
MAX_BODY_BYTES = 1_000_000
#: Largest body the codec endpoint reads (the Temporal UI sends a page of payloads).
CODEC_MAX_BODY_BYTES = 4 * 1024 * 1024
CODEC_PATHS = "/codec/"
#: Paths answered without a token: the console page (it asks for one) and the health check.
OPEN_PATHS = frozenset({"/", "/healthz"})
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
SECURITY_HEADERS = [
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


class AccessError(DurableAgentError, ValueError):
    """Access settings that cannot be used (a bad token list, auth-less on a network)."""


@dataclass(frozen=True)
class GatewayAccess:
    """``tokens``: bearer token -> user of the gateway's own list (``token:user``);
    ``admins``: principals who see and act on every session; ``hosts``: the host names
    served (a ``Host`` naming another is refused: DNS rebinding); ``origins``: browser
    origins besides the gateway's own; ``codec_origins``: those that may use the codec
    endpoint (the Temporal UI's)."""

    tokens: Mapping[str, str] = field(default_factory=dict)
    admins: Collection[Principal] = ()
    hosts: Collection[str] = LOOPBACK_NAMES
    origins: Collection[str] = ()
    max_body: int = MAX_BODY_BYTES
    jwks: JwksVerifier | None = None
    """An identity provider's keys: bearer JWTs it signed name their principal."""
    signing_keys: Mapping[Principal, ApproverKey] = field(default_factory=dict)
    """Approver keys by principal: their decisions are signed as theirs."""
    proxies: Collection[str] = ()
    """Addresses of proxies that authenticate users themselves: from them (only), the
    ``user_header`` names the user (``proxy:user``)."""
    user_header: str = "x-forwarded-user"
    codec_origins: Collection[str] = ()

    @property
    def authenticated(self) -> bool:
        return bool(self.tokens) or self.jwks is not None or bool(self.proxies)

    def is_admin(self, principal: Principal | None) -> bool:
        return principal is not None and principal in self.admins

    @classmethod
    def from_environment(
        cls,
        host: str,
        more_hosts: Collection[str] = (),
        origins: Collection[str] = (),
        codec_origins: Collection[str] = (),
    ) -> GatewayAccess:
        """``DURABLE_AGENT_GATEWAY_TOKENS`` (``user=token,...``) and
        ``DURABLE_AGENT_GATEWAY_ADMINS`` (principals: ``token:ops,jwt:alice``; a bare
        name is a user of the token list); without users, ``host`` must be a loopback
        address."""
        tokens: dict[str, str] = {}
        for item in filter(None, os.environ.get("DURABLE_AGENT_GATEWAY_TOKENS", "").split(",")):
            user, _, token = item.strip().partition("=")
            if not user or not set(user) <= USER_NAME or len(token) < 16:
                raise AccessError(
                    "DURABLE_AGENT_GATEWAY_TOKENS: user=token pairs, a user of letters, digits "
                    "and _.-@, a token of at least 16 characters"
                )
            tokens[token] = user
        try:
            admins = [
                Principal.parse(a, bare="token")
                for a in os.environ.get("DURABLE_AGENT_GATEWAY_ADMINS", "").split(",")
                if a.strip()
            ]
            jwks = JwksVerifier.from_environment()
            keys = signing_keys_from_environment()
        except PrincipalError as error:
            raise AccessError(f"DURABLE_AGENT_GATEWAY_ADMINS: {error}") from None
        except (ValueError, OSError) as error:
            raise AccessError(str(error)) from None
        unlisted = [str(a) for a in admins if a.source == "token" and a.name not in tokens.values()]
        if unlisted:
            raise AccessError(
                f"DURABLE_AGENT_GATEWAY_ADMINS: {', '.join(unlisted)} is not a user of "
                "DURABLE_AGENT_GATEWAY_TOKENS; name an identity provider's user as "
                "jwt:NAME and a proxy's as proxy:NAME"
            )
        if os.environ.get("DURABLE_AGENT_CODEC_TOKEN"):
            raise AccessError(
                "DURABLE_AGENT_CODEC_TOKEN is gone: the codec endpoint takes the gateway's "
                "own users; give the Temporal UI a user in DURABLE_AGENT_GATEWAY_TOKENS "
                "(and make it an admin to decode every session) or let it pass its users' "
                "tokens (DURABLE_AGENT_GATEWAY_JWKS_URL)"
            )
        proxies = [p for p in os.environ.get("DURABLE_AGENT_GATEWAY_PROXIES", "").split(",") if p]
        header = os.environ.get("DURABLE_AGENT_GATEWAY_USER_HEADER", "X-Forwarded-User").lower()
        if not tokens and jwks is None and not proxies and not _loopback(host):
            raise AccessError(
                f"without DURABLE_AGENT_GATEWAY_TOKENS the gateway serves loopback only, not "
                f"{host}: anyone who can reach it could start sessions and approve their calls"
            )
        names = {host, *LOOPBACK_NAMES} if _loopback(host) else {host}
        return cls(
            tokens=tokens,
            admins=admins,
            hosts=names | set(more_hosts),
            origins=origins,
            jwks=jwks,
            signing_keys=keys,
            proxies=proxies,
            user_header=header,
            codec_origins=codec_origins,
        )

    def principal_for(self, token: str) -> Principal | None:
        """The principal a bearer token names (a configured token, else one the
        identity provider signed), or ``None``."""
        for known, user in self.tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return Principal("token", user)
        return self.jwks.user(token) if self.jwks is not None else None


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class GuardMiddleware:
    """The checks, in order: host, origin, body (type and size, counted as it is read),
    token. The principal is put in ``scope["state"]["principal"]`` (``None`` without
    authentication)."""

    def __init__(self, app: ASGIApp, access: GatewayAccess) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        path: str = scope["path"]
        codec = path.startswith(CODEC_PATHS)
        secure = _with_headers(send)
        problem = self._refusal(scope, headers, codec)
        if problem is not None:
            await _answer(secure, *problem)
            return
        if codec and scope["method"] == "OPTIONS":  # a CORS preflight: no body, no token
            await self.app(scope, receive, secure)
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
            limit = CODEC_MAX_BODY_BYTES if codec else self.access.max_body
            declared = headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                await _answer(secure, 413, f"body over {limit} bytes")
                return
            body, whole = await _read(receive, limit)
            if not whole:
                await _answer(secure, 413, f"body over {limit} bytes")
                return
        principal = None
        if self.access.authenticated and path not in OPEN_PATHS:
            # an identity provider's keys may need fetching: off the event loop
            principal = await asyncio.to_thread(self._principal, scope, headers)
            if principal is None:
                await _answer(
                    secure,
                    401,
                    "a bearer token is required",
                    "Authorization",
                    extra=[(b"www-authenticate", b"Bearer")],
                )
                return
        scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, _replay(body, receive) if body else receive, secure)

    def _refusal(
        self, scope: Scope, headers: dict[str, str], codec: bool
    ) -> tuple[int, str, str] | None:
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if name not in self.access.hosts:
            return 400, f"this gateway does not serve host {host!r}", "Host"
        origin = headers.get("origin")
        scheme = scope.get("scheme", "http")
        allowed = self.access.codec_origins if codec else self.access.origins
        if origin is not None and origin != f"{scheme}://{host}" and origin not in allowed:
            return 403, f"requests from {origin} are not allowed", "Origin"
        return None

    def _principal(self, scope: Scope, headers: dict[str, str]) -> Principal | None:
        client = scope.get("client")
        if client and client[0] in self.access.proxies:  # the proxy vouches for the user
            named = headers.get(self.access.user_header, "")
            return Principal("proxy", named) if named and set(named) <= USER_NAME else None
        token = headers.get("authorization", "")
        if token.lower().startswith("bearer "):
            return self.access.principal_for(token[7:].strip())
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
    send: Send,
    status: int,
    error: str,
    field: str | None = None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    body: dict[str, Any] = {"error": error, **({"field": field} if field else {})}
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": data})
