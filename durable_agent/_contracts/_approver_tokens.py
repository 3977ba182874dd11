"""Signed decisions: a name the caller types proves nothing, a token signed with the
approver's private key does.

A token is a JWT (EdDSA, Ed25519) whose key id and subject are the approver's name,
bound to one session, one approval (or grant) and one action, and short-lived. The
approver (or an entry point that authenticated them) signs with the private key; the workers
verify with the public keys they hold (``DURABLE_AGENT_APPROVER_KEYS``: a JSON file of
name -> PEM public key). Neither key ever enters a workflow payload; the token does,
and it is worth nothing for any other decision.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

AUDIENCE = "durable-agent"
KEYS_ENV = "DURABLE_AGENT_APPROVER_KEYS"
"""The worker's file of approver public keys (JSON: name -> PEM)."""
DEFAULT_TTL_SECONDS = 300
#: The longest a token may live (its ``exp`` after its ``iat``): workers refuse longer.
MAX_TTL_SECONDS = 3600


@dataclass(frozen=True)
class ApproverKey:
    """An approver's private key, to sign their decisions with."""

    name: str
    private_key: Ed25519PrivateKey

    @classmethod
    def generate(cls, name: str) -> ApproverKey:
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(cls, name: str, pem: bytes) -> ApproverKey:
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"approver key for {name!r}: not an Ed25519 private key")
        return cls(name, key)

    @classmethod
    def from_file(cls, path: str | Path) -> ApproverKey:
        """A key file written by ``durable-agent approver-key``: the name, then the PEM."""
        text = Path(path).read_text()
        name, _, pem = text.partition("\n")
        if not pem.strip():
            raise ValueError(
                f"{path}: expected the approver's name on the first line, then a PEM key"
            )
        return cls.from_pem(name.strip(), pem.encode())

    def private_pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def public_pem(self) -> str:
        return (
            self.private_key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def sign(
        self,
        session_id: str,
        subject: str,
        action: str,
        *,
        digest: str | None = None,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        now: float | None = None,
    ) -> str:
        """A token for one decision: ``action`` (approve, deny, respond, revoke) on
        ``subject`` (an approval id, or a grant id) of ``session_id``; ``digest``: the
        whole decision and its call (``decision_digest``), which workers require."""
        issued = time.time() if now is None else now
        claims = {
            "sub": self.name,
            "aud": AUDIENCE,
            "sid": session_id,
            "aid": subject,
            "act": action,
            "iat": int(issued),
            "exp": int(issued + ttl_seconds),
            **({"dig": digest} if digest is not None else {}),
        }
        return jwt.encode(claims, self.private_key, algorithm="EdDSA", headers={"kid": self.name})


class ApproverKeys:
    """The public keys a worker checks decisions with, by approver name."""

    def __init__(self, keys: dict[str, Ed25519PublicKey] | None = None) -> None:
        self._keys = dict(keys or {})

    @classmethod
    def from_json(cls, text: str) -> ApproverKeys:
        keys: dict[str, Ed25519PublicKey] = {}
        for name, pem in json.loads(text).items():
            key = serialization.load_pem_public_key(pem.encode())
            if not isinstance(key, Ed25519PublicKey):
                raise ValueError(f"approver {name!r}: not an Ed25519 public key")
            keys[name] = key
        return cls(keys)

    @classmethod
    def from_env(cls) -> ApproverKeys:
        """The keys in ``$DURABLE_AGENT_APPROVER_KEYS`` (none when it is unset)."""
        path = os.environ.get(KEYS_ENV)
        return cls.from_json(Path(path).read_text()) if path else cls()

    def __len__(self) -> int:
        return len(self._keys)

    def verify(
        self, token: str, session_id: str, subject: str, action: str, digest: str | None = None
    ) -> str:
        """The approver who signed ``token`` for exactly this decision (with ``digest``:
        its whole content and call, ``decision_digest``); ``ValueError`` saying why not
        otherwise. A token that would live longer than ``MAX_TTL_SECONDS`` is refused."""
        try:
            name = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError as error:
            raise ValueError(f"not a token ({error})") from None
        if not isinstance(name, str) or name not in self._keys:
            raise ValueError(f"no worker key for the signer {name!r}")
        key = self._keys[name]
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=["EdDSA"],
                audience=AUDIENCE,
                options={"require": ["exp", "iat", "sub", "sid", "aid", "act"]},
            )
        except jwt.PyJWTError as error:
            raise ValueError(str(error)) from None
        if claims["exp"] - claims["iat"] > MAX_TTL_SECONDS:
            raise ValueError(f"the token would live over {MAX_TTL_SECONDS} s")
        wanted = {"sub": name, "sid": session_id, "aid": subject, "act": action}
        if digest is not None:
            wanted["dig"] = digest
        wrong = [k for k, v in wanted.items() if claims.get(k) != v]
        if wrong:
            what = {
                "sub": "signer",
                "sid": "session",
                "aid": "call",
                "act": "action",
                "dig": "decision (its content, its call or the session's run)",
            }
            raise ValueError(f"signed for another {', '.join(what[k] for k in wrong)}")
        return name
