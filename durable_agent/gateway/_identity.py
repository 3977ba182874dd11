"""Who a gateway caller is: a principal (a name, and where the gateway learned it), a
bearer token checked against an identity provider's published keys (JWKS), and the
approver key the gateway signs that principal's decisions with.

A name means something only together with its source: the user ``ops`` of the
gateway's own token list and a JWT whose subject is ``ops`` are two people, and an
admin is named with the source too (``token:ops``).

The identity provider is the owner's choice (``DURABLE_AGENT_GATEWAY_JWKS_URL`` and
the audience and issuer it must have put in the token); a token it did not sign, one
for another audience, or an expired one names nobody. A user's decisions are signed
with their own approver key (a folder of ``<user>.key`` files, as ``durable-agent
approver-key`` writes them), so the workers verify them as any signed decision.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

import jwt

from durable_agent._contracts._approver_tokens import ApproverKey
from durable_agent._errors import DurableAgentError

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
