"""Who a gateway caller is: a bearer token checked against an identity provider's
published keys (JWKS), and the approver key the gateway signs that user's decisions
with.

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

import jwt

from durable_agent.approver_tokens import ApproverKey

#: What a user name may hold (it becomes part of conversation session ids).
USER_NAME = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-@")
ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "PS256", "EdDSA"]


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

    def user(self, token: str) -> str | None:
        """The user the token names, or ``None`` when it proves nothing."""
        try:
            key = self._client.get_signing_key_from_jwt(token).key
            claims = jwt.decode(
                token, key, algorithms=ALGORITHMS, audience=self.audience, issuer=self.issuer,
                options={"require": ["exp", self.claim]},
            )  # fmt: skip
        except jwt.PyJWTError:
            return None
        name = claims.get(self.claim)
        return name if isinstance(name, str) and name and set(name) <= USER_NAME else None


def signing_keys_from_environment() -> dict[str, ApproverKey]:
    """The approver keys in ``DURABLE_AGENT_GATEWAY_APPROVER_KEYS`` (a folder of
    ``<user>.key`` files), by user; none when it is unset."""
    folder = os.environ.get("DURABLE_AGENT_GATEWAY_APPROVER_KEYS")
    if not folder:
        return {}
    keys = {}
    for path in sorted(Path(folder).glob("*.key")):
        key = ApproverKey.from_file(path)
        keys[key.name] = key
    return keys
