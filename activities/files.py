"""Files a message gives by URL, fetched for a model whose wire takes none by URL (Chat
Completions carries a file inline or by id only), and only from the origins the
worker's owner registered (``Capabilities.file_origins``): a session's messages
choose the URL, so nothing else is fetched. A file that cannot be fetched is left as
it was, and the request says it was left out."""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from urllib.parse import urlsplit

import httpx
import structlog

from durable_agent.core import FileData, FilePart, Message

log = structlog.get_logger()

#: The largest file fetched (a request carries it inline, in base64).
MAX_FILE_BYTES = 20 * 1024 * 1024
#: Files kept between the model calls of a worker: every call of a session sends its
#: window again, and a file is fetched once while it stays here.
CACHE_BYTES = 64 * 1024 * 1024
FETCH_SECONDS = 30.0


class FetchFailed(Exception):
    """Why a file was not fetched (the request leaves it out)."""


class FileFetcher:
    def __init__(
        self,
        fetchable: Callable[[str], bool],
        *,
        max_bytes: int = MAX_FILE_BYTES,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        """``fetchable``: whether a URL is on an origin the worker's owner registered
        (``Capabilities.file_fetchable``)."""
        self._fetchable = fetchable
        self._max_bytes = max_bytes
        self._cache_bytes = cache_bytes
        self._cache: OrderedDict[str, tuple[FileData, int]] = OrderedDict()
        self._cached = 0

    async def inline(self, messages: Sequence[Message]) -> list[Message]:
        """``messages`` with each file given by URL on a registered origin sent inline
        instead (the array the session keeps is not touched)."""
        out: list[Message] = []
        for message in messages:
            content = getattr(message, "content", None)
            if not isinstance(content, list) or not any(self._wanted(p) for p in content):
                out.append(message)
                continue
            parts = [await self._inlined(p) if self._wanted(p) else p for p in content]
            out.append(message.model_copy(update={"content": parts}))
        return out

    def _wanted(self, part: object) -> bool:
        if not isinstance(part, FilePart):
            return False
        file = part.file
        return bool(file.file_url) and not file.file_data and self._fetchable(file.file_url or "")

    async def _inlined(self, part: FilePart) -> FilePart:
        url = part.file.file_url or ""
        try:
            fetched = await self._fetched(url)
        except FetchFailed as error:
            log.warning("file not fetched; the request leaves it out", url=url, error=str(error))
            return part
        name = part.file.filename or fetched.filename
        return FilePart(file=fetched.model_copy(update={"filename": name}))

    async def _fetched(self, url: str) -> FileData:
        cached = self._cache.get(url)
        if cached is not None:
            self._cache.move_to_end(url)
            return cached[0]
        data, media_type = await self._get(url)
        file = FileData(
            file_data=f"data:{media_type};base64,{base64.b64encode(data).decode()}",
            filename=PurePosixPath(urlsplit(url).path).name or None,
        )
        self._keep(url, file, len(data))
        return file

    async def _get(self, url: str) -> tuple[bytes, str]:
        """The file's bytes and media type: one GET, no redirect followed (it could
        lead off the registered origin), at most ``max_bytes``."""
        async with httpx.AsyncClient(follow_redirects=False, timeout=FETCH_SECONDS) as http:
            try:
                async with http.stream("GET", url) as response:
                    if response.status_code != 200:
                        raise FetchFailed(f"HTTP {response.status_code}")
                    body = bytearray()
                    async for chunk in response.aiter_bytes():
                        body += chunk
                        if len(body) > self._max_bytes:
                            raise FetchFailed(f"larger than {self._max_bytes} bytes")
                    kind = response.headers.get("content-type", "application/octet-stream")
            except httpx.HTTPError as error:
                raise FetchFailed(f"{type(error).__name__}: {error}") from None
        return bytes(body), kind.split(";", 1)[0].strip() or "application/octet-stream"

    def _keep(self, url: str, file: FileData, size: int) -> None:
        if size > self._cache_bytes:
            return
        self._cache[url] = (file, size)
        self._cached += size
        while self._cached > self._cache_bytes:
            _, (_, dropped) = self._cache.popitem(last=False)
            self._cached -= dropped
