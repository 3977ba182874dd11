"""How payloads travel and rest: temporalio's pydantic converter without the nulls of
durable-agent's own models, encryption at rest (AES-256-GCM, each payload bound to its
session), and large payloads kept in a store with a reference in history."""

from __future__ import annotations

from ._encryption import (
    ENCRYPTED,
    CodecKeyError,
    CodecKeys,
    EncryptionCodec,
    payload_session,
    with_encryption,
)
from ._lean import LeanPayloadConverter, lean_data_converter
from ._storage import (
    DEFAULT_THRESHOLD_BYTES,
    PayloadStorageError,
    check_fits,
    payload_storage,
    with_payload_storage,
)

__all__ = [
    "DEFAULT_THRESHOLD_BYTES",
    "ENCRYPTED",
    "CodecKeyError",
    "CodecKeys",
    "EncryptionCodec",
    "LeanPayloadConverter",
    "PayloadStorageError",
    "check_fits",
    "lean_data_converter",
    "payload_session",
    "payload_storage",
    "with_encryption",
    "with_payload_storage",
]
