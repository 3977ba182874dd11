"""Files a message gives by URL, fetched for a model whose wire takes none by URL (Chat
Completions carries a file inline or by id only), and only where the worker's owner
allows (``Capabilities.file_origins``): a session's messages choose the URL, so nothing
else is fetched.

A request's files are fetched after the request is fitted to its context, so a file
the model takes no files for, or one in a message the window left out, costs nothing.
The newest come first, within the owner's limits (``FileLimits``: files and bytes per
request, one file's bytes, one deadline per fetch) and within what the context budget
leaves: a file counts as text of its size would. Any file by URL that is not sent
inline is replaced by a marker saying why, so the model knows it was there.

Fetched files are kept per session, never shared between sessions (two users' sessions
may name the same URL and only one be allowed to read it), for a bounded time and
size; each use asks the origin first whether the file changed (``ETag`` or
``Last-Modified``), so a file the origin no longer serves is not served from here."""

from __future__ import annotations

import asyncio
import base64
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import urlsplit

import httpx
import structlog

from durable_agent._wire._messages import FileData, FilePart, Message, TextPart
from durable_agent._wire._request_messages import PreparedMessages
from durable_agent.capabilities import FileLimits
from durable_agent.capabilities._urls import without_secrets

log = structlog.get_logger()


class FetchFailed(Exception):
    """Why a file was not fetched (the request leaves it out, saying so)."""


@dataclass
class _Kept:
    file: FileData
    size: int
    etag: str | None
    modified: str | None
    at: float


@dataclass
class _Allowance:
    """What is left of one request's limits as its files are fetched."""

    files: int
    bytes: int
    tokens: float | None
    chars_per_token: float


def _omitted(why: str) -> TextPart:
    return TextPart(text=f"[file omitted: {why}]")


NOT_ALLOWED = _omitted("Chat Completions takes no file by URL")


class FileFetcher:
    def __init__(
        self,
        fetchable: Callable[[str], str | None],
        limits: FileLimits | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``fetchable``: the URL to fetch for a file's URL, when the worker's owner
        allows it (``Capabilities.file_fetchable``)."""
        self._fetchable = fetchable
        self.limits = limits or FileLimits()
        self._clock = clock
        self._cache: OrderedDict[tuple[str, str], _Kept] = OrderedDict()
        self._cached = 0

    async def inline(
        self,
        messages: PreparedMessages,
        session: str,
        *,
        tokens_left: float | None = None,
        chars_per_token: float = 4.0,
    ) -> PreparedMessages:
        """``messages`` with each file by URL sent inline where the owner allows it and
        the limits leave space (newest first), and a marker for every other one; the
        array the session keeps is not touched. ``room_tokens``: what the context budget
        leaves for files (``None``: no budget)."""
        limits = self.limits
        left = _Allowance(limits.max_files, limits.max_bytes, tokens_left, chars_per_token)
        out: list[Message] = list(messages)
        for index in range(len(out) - 1, -1, -1):
            content = getattr(out[index], "content", None)
            if not isinstance(content, list) or not any(map(_by_url, content)):
                continue
            parts = list(content)
            for k in range(len(parts) - 1, -1, -1):
                if _by_url(parts[k]):
                    parts[k] = await self._part(parts[k], session, left)
            out[index] = out[index].model_copy(update={"content": parts})
        return PreparedMessages(out, messages.context, messages.left_out)

    async def _part(self, part: FilePart, session: str, left: _Allowance) -> FilePart | TextPart:
        given = part.file.file_url or ""
        url = self._fetchable(given)
        if url is None:
            return NOT_ALLOWED
        if left.files <= 0:
            return self._left_out(
                given,
                f"this request already carries {self.limits.max_files} files fetched by "
                "URL, the most this worker sends (file_limits.max_files)",
            )
        most = min(self.limits.max_file_bytes, left.bytes)
        try:
            file, size = await self._fetched(session, url, most)
        except FetchFailed as error:
            return self._left_out(given, f"it could not be fetched ({error})")
        if left.tokens is not None:
            tokens = size / left.chars_per_token
            if tokens > left.tokens:
                return self._left_out(given, "it does not fit the request's context budget")
            left.tokens -= tokens
        left.files -= 1
        left.bytes -= size
        return FilePart(
            file=file.model_copy(update={"filename": part.file.filename or file.filename})
        )

    def _left_out(self, url: str, why: str) -> TextPart:
        log.warning("file left out of the request", url=without_secrets(url), why=why)
        return _omitted(why)

    async def _fetched(self, session: str, url: str, most: int) -> tuple[FileData, int]:
        """The file at ``url`` and its size: kept for this session and unchanged at its
        origin, or fetched now (at most ``most`` bytes)."""
        key = (session, url)
        kept = self._cache.get(key)
        if kept is not None and self._clock() - kept.at > self.limits.cache_seconds:
            self._drop(key)
            kept = None
        if kept is not None and kept.size > most:
            raise FetchFailed(f"larger than the {most} bytes left for this request")
        ask = {}
        if kept is not None and kept.etag:
            ask["If-None-Match"] = kept.etag
        if kept is not None and kept.modified:
            ask["If-Modified-Since"] = kept.modified
        try:
            got = await self._get(url, most, ask)
        except FetchFailed:
            if kept is not None:  # the origin no longer serves it: neither do we
                self._drop(key)
            raise
        if got is None:  # not modified
            assert kept is not None
            self._cache.move_to_end(key)
            return kept.file, kept.size
        data, media_type, etag, modified = got
        file = FileData(
            file_data=f"data:{media_type};base64,{base64.b64encode(data).decode()}",
            filename=PurePosixPath(urlsplit(url).path).name or None,
        )
        if kept is not None:
            self._drop(key)
        if etag or modified:  # a file its origin cannot say is unchanged is not kept
            self._keep(key, _Kept(file, len(data), etag, modified, self._clock()))
        return file, len(data)

    async def _get(
        self, url: str, most: int, ask: dict[str, str]
    ) -> tuple[bytes, str, str | None, str | None] | None:
        """One GET within one deadline, no redirect followed (it could lead off the
        allowed origin), at most ``most`` bytes; ``None`` when the origin says the kept
        copy is unchanged (304)."""
        try:
            async with (
                asyncio.timeout(self.limits.fetch_seconds),
                httpx.AsyncClient(follow_redirects=False) as http,
                http.stream("GET", url, headers=ask) as response,
            ):
                if response.status_code == 304 and ask:
                    return None
                if response.status_code != 200:
                    raise FetchFailed(f"HTTP {response.status_code}")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > most:
                    raise FetchFailed(f"larger than {most} bytes")
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > most:
                        raise FetchFailed(f"larger than {most} bytes")
                headers = response.headers
        except TimeoutError:
            raise FetchFailed(f"not fetched within {self.limits.fetch_seconds} s") from None
        except httpx.HTTPError as error:
            raise FetchFailed(type(error).__name__) from None
        kind = headers.get("content-type", "").split(";", 1)[0].strip()
        return (
            bytes(body),
            kind or "application/octet-stream",
            headers.get("etag"),
            headers.get("last-modified"),
        )

    def _keep(self, key: tuple[str, str], kept: _Kept) -> None:
        if kept.size > self.limits.cache_bytes:
            return
        self._cache[key] = kept
        self._cached += kept.size
        while self._cached > self.limits.cache_bytes:
            self._drop(next(iter(self._cache)))

    def _drop(self, key: tuple[str, str]) -> None:
        self._cached -= self._cache.pop(key).size


def _by_url(part: object) -> bool:
    return isinstance(part, FilePart) and bool(part.file.file_url) and not part.file.file_data
