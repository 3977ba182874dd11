"""Large payloads by reference: Temporal's external storage (a claim-check step in the
data converter) for tool results, images and files over a threshold.

A payload over the threshold (an activity's input or result, a signal, an update, a
continue-as-new input) is written to a store and history keeps a reference of a few
hundred bytes, so a 20 MB tool result or a 5 MB image passes through a session without
going over Temporal's 2 MB limit or making history grow by its size. Payloads are
encrypted first when the codec is on (the store holds ciphertext).

Every client and worker of the namespace needs the same storage: the process that
writes a reference is rarely the one that reads it.

    file:///var/lib/durable-agent/payloads   one directory (development, tests, a shared volume)
    s3://bucket                               Amazon S3 (``pip install durable-agent[s3]``)
    gs://bucket                               Google Cloud Storage (``durable-agent[gcs]``)

The message array keeps its own reference scheme (the transcript store): that is what
lets a model call carry only the new messages.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from durable_agent._errors import DurableAgentError, PayloadTooLarge

#: Payloads from this size on go to the store (Temporal warns at 512 KB, refuses 2 MB).
DEFAULT_THRESHOLD_BYTES = 256 * 1024
#: What Temporal takes in one payload (the server's default blob limit, 2 MiB).
TEMPORAL_PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024
LOCAL_DRIVER = "durable_agent.local"


class PayloadStorageError(DurableAgentError, ValueError):
    """A storage URL that cannot be used, or a stored payload that cannot be read."""


def check_fits(converter: DataConverter, value: object, what: str) -> None:
    """Refuse before sending what Temporal would refuse with a transport error (the
    server's gRPC limit), saying what to do instead."""
    if converter.external_storage is not None:
        return
    size = converter.payload_converter.to_payloads([value])[0].ByteSize()
    if size > TEMPORAL_PAYLOAD_LIMIT_BYTES:
        raise PayloadTooLarge(
            f"{what} is {size} bytes; Temporal takes at most {TEMPORAL_PAYLOAD_LIMIT_BYTES} "
            "in one payload. Give the client and the workers a payload store "
            "(--payload-store, docs/how-to/operating.md#large-payloads) and it goes by reference."
        )


class LocalPayloadDriver(StorageDriver):
    """Payloads as files in one directory, named by the SHA-256 of their bytes (the same
    payload is written once). A read checks the hash, so a changed file is an error,
    not a different conversation. Several workers share it on a shared volume."""

    def __init__(self, directory: Path | str, name: str = LOCAL_DRIVER) -> None:
        self._directory = Path(directory)
        self._name = name

    def name(self) -> str:
        return self._name

    def type(self) -> str:
        return LOCAL_DRIVER

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        return [await asyncio.to_thread(self._write, payload) for payload in payloads]

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return [await asyncio.to_thread(self._read, claim) for claim in claims]

    def _path(self, digest: str) -> Path:
        return self._directory / digest[:2] / digest

    def _write(self, payload: Payload) -> StorageDriverClaim:
        data = payload.SerializeToString()
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(digest)
        if not path.exists():  # written whole or not at all: a reader never sees half
            path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as part:
                part.write(data)
            os.replace(part.name, path)
        return StorageDriverClaim(claim_data={"sha256": digest})

    def _read(self, claim: StorageDriverClaim) -> Payload:
        digest = claim.claim_data.get("sha256", "")
        path = self._path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise PayloadStorageError(
                f"stored payload {digest} is not in {self._directory} (is every worker "
                "and client given the same payload store?)"
            ) from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise PayloadStorageError(f"stored payload {path} does not match its hash")
        payload = Payload()
        payload.ParseFromString(data)
        return payload


def payload_storage(url: str, *, threshold_bytes: int = DEFAULT_THRESHOLD_BYTES) -> ExternalStorage:
    """The external storage a URL names: ``file://`` (or a path), ``s3://``, ``gs://``."""
    parsed = urlparse(url)
    driver: StorageDriver
    if parsed.scheme in ("", "file"):
        driver = LocalPayloadDriver(Path(parsed.path if parsed.scheme else url))
    elif parsed.scheme in ("s3", "gs"):
        if not parsed.netloc:
            raise PayloadStorageError(f"{url}: name the bucket ({parsed.scheme}://BUCKET)")
        from ._buckets import bucket_driver

        driver = bucket_driver(parsed.scheme, parsed.netloc)
    else:
        raise PayloadStorageError(
            f"{url}: a payload store is file:///DIRECTORY, s3://BUCKET or gs://BUCKET"
        )
    return ExternalStorage(drivers=[driver], payload_size_threshold=threshold_bytes)


def with_payload_storage(
    converter: DataConverter, storage: ExternalStorage | None
) -> DataConverter:
    """``converter`` with large payloads going to ``storage`` (unchanged for ``None``)."""
    if storage is None or converter.external_storage is storage:
        return converter
    return dataclasses.replace(converter, external_storage=storage)
