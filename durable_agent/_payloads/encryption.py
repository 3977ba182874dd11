"""Encryption at rest: an AES-GCM payload codec for Temporal, and the same keys for
the workers' transcript store.

Conversations, tool results and approval tokens are workflow payloads; without a codec
they sit in plaintext in Temporal's database. With one, the server only ever holds
ciphertext: every client and worker of the namespace encrypts before sending and
decrypts after reading (``--codec-keys``), and the Temporal UI decodes through the
gateway's codec endpoint. Keys carry ids, so a new key can take over while old
payloads stay readable: the first key encrypts, every key decrypts.

    DURABLE_AGENT_CODEC_KEYS="k2:<base64 of 32 bytes>,k1:<base64 of 32 bytes>"

Each payload says which session it belongs to (the workflow it is an input, result or
state of), in its metadata and in the data the cipher authenticates, so the codec
endpoint decodes a payload only for someone who may see that session, and the name
cannot be changed without the payload failing to decrypt. Failure messages and stack
traces are encoded too (``encode_common_attributes``): a tool's exception text or a
refusal that quotes its input would otherwise sit beside the ciphertext in plaintext.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import Sequence
from typing import Self

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
    WorkflowSerializationContext,
)

from durable_agent._errors import DurableAgentError

#: The metadata encoding of an encrypted payload.
ENCRYPTED = b"binary/encrypted"
KEY_ID = "encryption-key-id"
#: The session (workflow id) an encrypted payload belongs to, authenticated by the cipher.
SESSION = "encryption-session"
NONCE_BYTES = 12
#: A stored text encrypted with these keys: ``enc1:<key id>:<base64 nonce+ciphertext>``.
STORED_PREFIX = "enc1:"


class CodecKeyError(DurableAgentError, ValueError):
    """Keys that cannot be used, or a payload no key here can open."""


@dataclasses.dataclass(frozen=True)
class CodecKeys:
    """AES-256-GCM keys by id; the first encrypts."""

    keys: tuple[tuple[str, bytes], ...]

    def __post_init__(self) -> None:
        if not self.keys:
            raise CodecKeyError("no codec keys given")
        for key_id, key in self.keys:
            if not key_id or ":" in key_id or "," in key_id:
                raise CodecKeyError(f"codec key id {key_id!r}: letters, digits, - and _ only")
            if len(key) != 32:
                raise CodecKeyError(f"codec key {key_id!r} is {len(key)} bytes, not 32")

    @classmethod
    def parse(cls, text: str) -> CodecKeys:
        """``id:base64key,id:base64key`` (the first encrypts)."""
        keys = []
        for item in (i.strip() for i in text.split(",") if i.strip()):
            key_id, _, encoded = item.partition(":")
            try:
                keys.append((key_id, base64.b64decode(encoded, validate=True)))
            except binascii.Error:
                raise CodecKeyError(f"codec key {key_id!r} is not base64") from None
        return cls(tuple(keys))

    @classmethod
    def from_environment(cls) -> CodecKeys | None:
        text = os.environ.get("DURABLE_AGENT_CODEC_KEYS")
        return cls.parse(text) if text else None

    @staticmethod
    def generate(key_id: str) -> str:
        """A new key in the ``id:base64`` form ``parse`` reads."""
        return f"{key_id}:{base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()}"

    @property
    def current(self) -> str:
        return self.keys[0][0]

    def seal(self, plain: bytes, associated: bytes = b"") -> tuple[str, bytes]:
        """``plain`` encrypted with the current key: its id, and nonce + ciphertext."""
        nonce = os.urandom(NONCE_BYTES)
        key_id, key = self.keys[0]
        return key_id, nonce + AESGCM(key).encrypt(nonce, plain, associated)

    def open(self, key_id: str, sealed: bytes, associated: bytes = b"") -> bytes:
        key = dict(self.keys).get(key_id)
        if key is None:
            raise CodecKeyError(
                f"data encrypted with key {key_id!r}, which is not among this process's "
                f"codec keys ({', '.join(k for k, _ in self.keys)})"
            )
        try:
            return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], associated)
        except InvalidTag:
            raise CodecKeyError(f"data under key {key_id!r} does not decrypt (altered?)") from None

    # -- stored texts (the transcript store)

    def seal_text(self, text: str, associated: str) -> str:
        key_id, sealed = self.seal(text.encode(), associated.encode())
        return f"{STORED_PREFIX}{key_id}:{base64.b64encode(sealed).decode()}"

    def open_text(self, stored: str, associated: str) -> str:
        """A stored text, decrypted (one written before encryption is returned as is)."""
        if not stored.startswith(STORED_PREFIX):
            return stored
        key_id, _, encoded = stored.removeprefix(STORED_PREFIX).partition(":")
        return self.open(key_id, base64.b64decode(encoded), associated.encode()).decode()


class EncryptionCodec(PayloadCodec, WithSerializationContext):
    """Temporal payloads encrypted with ``keys`` (AES-256-GCM), each bound to its
    ``session`` (temporalio hands the codec the workflow a payload belongs to). Payloads
    that are not encrypted decode as they are, so histories from before encryption still
    replay; ones encrypted before sessions were stamped decode without one."""

    def __init__(self, keys: CodecKeys, session: str | None = None) -> None:
        self.keys = keys
        self.session = session

    def with_context(self, context: SerializationContext) -> Self:
        if isinstance(context, WorkflowSerializationContext | ActivitySerializationContext):
            return type(self)(self.keys, context.workflow_id or None)
        return self

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        associated = self.session.encode() if self.session else b""
        for payload in payloads:
            key_id, sealed = self.keys.seal(payload.SerializeToString(), associated)
            metadata = {"encoding": ENCRYPTED, KEY_ID: key_id.encode()}
            if self.session:
                metadata[SESSION] = associated
            out.append(Payload(metadata=metadata, data=sealed))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCRYPTED:
                out.append(payload)
                continue
            key_id = payload.metadata.get(KEY_ID, b"").decode()
            associated = payload.metadata.get(SESSION, b"")
            plain = Payload()
            plain.ParseFromString(self.keys.open(key_id, payload.data, associated))
            out.append(plain)
        return out


def payload_session(payload: Payload) -> str | None:
    """The session an encrypted payload is bound to (``None``: not encrypted, or
    encrypted before payloads were bound to sessions)."""
    if payload.metadata.get("encoding") != ENCRYPTED:
        return None
    found = payload.metadata.get(SESSION, b"").decode()
    return found or None


def with_encryption(converter: DataConverter, keys: CodecKeys | None) -> DataConverter:
    """``converter`` with the encryption codec and failures' messages and stack traces
    encoded (unchanged without keys)."""
    if keys is None:
        return converter
    return dataclasses.replace(
        converter,
        payload_codec=EncryptionCodec(keys),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
