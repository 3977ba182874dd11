"""Temporal's S3 and GCS storage drivers behind a ``s3://`` or ``gs://`` URL.

The drivers take an open client; a client of aioboto3 or gcloud-aio is opened inside
an event loop, and a payload store is named before one runs (on the command line,
in settings). So the client here opens on the first payload, once, and credentials
come the usual way (``AWS_*`` variables or the instance role; Application Default
Credentials)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Generic, TypeVar

from temporalio.converter import StorageDriver

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
