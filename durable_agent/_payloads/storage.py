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

Also here: temporalio's pydantic converter leaving out the nulls of durable-agent's own
models (``LeanPayloadConverter``), and Temporal's S3 and GCS drivers behind ``s3://`` and
``gs://`` URLs (``bucket_driver``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import urlparse

from pydantic import BaseModel
from pydantic_core import to_json
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    JSONPlainPayloadConverter,
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


# temporalio's pydantic converter, leaving out the nulls of durable-agent's own models.
#
# Every activity input and result stays in history for the life of the session, and
# most of their optional fields are unset: a tool call's input and its result carried
# ``"approval":null,"target":null,...`` in every one, a tenth of a session's history.
# Left out, they read back the same, as the field's default is ``None``: a test checks
# that of every model in the package, and the two fields whose ``None`` means something
# else put it back themselves (``contract_base.nulls_kept``). Messages were already
# stored this way (``transcript.canonical_json``). Values of other types, the owner's
# own models among them, are converted exactly as temporalio does; reading is
# unchanged, so payloads written either way read back alike.

#: Whose models lose their nulls: the package's own, by module.
OWN_MODULES = ("durable_agent.", "workflows.", "activities.")


class LeanJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """JSON by pydantic, without the null fields of durable-agent's models."""

    def to_payload(self, value: Any) -> Payload | None:
        if isinstance(value, BaseModel) and type(value).__module__.startswith(OWN_MODULES):
            data = to_json(value, exclude_none=True)
            return Payload(metadata={"encoding": self.encoding.encode()}, data=data)
        return super().to_payload(value)


#: One for the process: temporalio makes a payload converter for every workflow run and
#: twice for every activation, and a fresh JSON converter would build its serializer and
#: empty its cache of type adapters (a schema built again per run) each time.
_CONVERTERS = tuple(
    LeanJSONPayloadConverter() if isinstance(c, JSONPlainPayloadConverter) else c
    for c in DefaultPayloadConverter.default_encoding_payload_converters
)


class LeanPayloadConverter(PydanticPayloadConverter):
    """``PydanticPayloadConverter`` with ``LeanJSONPayloadConverter`` for JSON."""

    def __init__(self) -> None:
        CompositePayloadConverter.__init__(self, *_CONVERTERS)


lean_data_converter = DataConverter(payload_converter_class=LeanPayloadConverter)
"""What the workers and clients of durable-agent convert payloads with."""


# Temporal's S3 and GCS storage drivers behind a ``s3://`` or ``gs://`` URL.
#
# The drivers take an open client; a client of aioboto3 or gcloud-aio is opened inside
# an event loop, and a payload store is named before one runs (on the command line,
# in settings). So the client here opens on the first payload, once, and credentials
# come the usual way (``AWS_*`` variables or the instance role; Application Default
# Credentials).

ClientT = TypeVar("ClientT")


class _Opened(Generic[ClientT]):
    """A client made on first use (one, whatever the number of concurrent payloads)."""

    def __init__(self, open_client: Callable[[], Awaitable[ClientT]]) -> None:
        self._open_client = open_client
        self._client: ClientT | None = None
        self._lock: asyncio.Lock | None = None

    async def get(self) -> ClientT:
        if self._client is None:
            self._lock = self._lock or asyncio.Lock()
            async with self._lock:
                if self._client is None:
                    self._client = await self._open_client()
        return self._client


def _missing(extra: str, error: ImportError) -> ImportError:
    return ImportError(
        f"this payload store needs `pip install durable-agent[{extra}]` ({error.name} is "
        "not installed)"
    )


def bucket_driver(scheme: str, bucket: str) -> StorageDriver:
    return _s3_driver(bucket) if scheme == "s3" else _gcs_driver(bucket)


def _s3_driver(bucket: str) -> StorageDriver:
    try:
        import aioboto3
        from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
        from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client
    except ImportError as error:
        raise _missing("s3", error) from None

    async def open_client() -> S3StorageDriverClient:
        # aioboto3 clients are context managers; this one lives as long as the process
        client = await aioboto3.Session().client("s3").__aenter__()
        return new_aioboto3_client(client)

    opened: _Opened[S3StorageDriverClient] = _Opened(open_client)

    class LazyS3(S3StorageDriverClient):
        async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
            await (await opened.get()).put_object(bucket=bucket, key=key, data=data)

        async def object_exists(self, *, bucket: str, key: str) -> bool:
            return await (await opened.get()).object_exists(bucket=bucket, key=key)

        async def get_object(self, *, bucket: str, key: str) -> bytes:
            return await (await opened.get()).get_object(bucket=bucket, key=key)

        def describe(self) -> Mapping[str, str]:
            return {"bucket": bucket}

    return S3StorageDriver(client=LazyS3(), bucket=bucket)


def _gcs_driver(bucket: str) -> StorageDriver:
    try:
        from gcloud.aio.storage import Storage
        from temporalio.contrib.gcp.gcsdriver import GCSStorageDriver, GCSStorageDriverClient
        from temporalio.contrib.gcp.gcsdriver.gcloud_aio import new_gcloud_aio_client
    except ImportError as error:
        raise _missing("gcs", error) from None

    async def open_client() -> GCSStorageDriverClient:
        return new_gcloud_aio_client(Storage())

    opened: _Opened[GCSStorageDriverClient] = _Opened(open_client)

    class LazyGcs(GCSStorageDriverClient):
        async def put_object(self, *, bucket: str, object_name: str, data: bytes) -> None:
            client = await opened.get()
            await client.put_object(bucket=bucket, object_name=object_name, data=data)

        async def object_exists(self, *, bucket: str, object_name: str) -> bool:
            client = await opened.get()
            return await client.object_exists(bucket=bucket, object_name=object_name)

        async def get_object(self, *, bucket: str, object_name: str) -> bytes:
            return await (await opened.get()).get_object(bucket=bucket, object_name=object_name)

        def describe(self) -> Mapping[str, str]:
            return {"bucket": bucket}

    return GCSStorageDriver(client=LazyGcs(), bucket=bucket)
