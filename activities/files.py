"""Files a message gives by URL, fetched for a model whose wire takes none by URL (Chat
Completions carries a file inline or by id only), and only where the worker's owner
allows (``Capabilities.file_origins``): a session's messages choose the URL, so nothing
else is fetched.

A request's files are fetched after the request is fitted to its context, so a file
the model takes no files for, or one in a message the window left out, costs nothing.
The newest come first, within the owner's limits (``FileLimits``) and within what the
context budget leaves, where a file counts as text of its size would. The limits count
what a request costs, not what it gains: every part considered takes one of
``max_files`` whether it is sent, refused or served from memory, every byte read counts
against ``max_bytes`` even from a file then refused, and one deadline
(``fetch_seconds``) bounds all of a request's fetches together. What a file may
weigh is decided before it is asked for, so a part with no room left is never fetched.
Any file by URL that is not sent inline is replaced by a marker saying why, so the
model knows it was there.

What is remembered belongs to one run chain of one session (the caller's ``chain``),
never to a workflow id, which a later session may reuse, and never to another session
(two users' sessions may name the same URL and only one be allowed to read it). Kept
files are bounded in time and bytes, and each use asks the origin first whether the
file changed (``ETag`` or ``Last-Modified``), so a file the origin no longer serves is
not served from here. Refusals are bounded in time and number; a part refused once is
left out of the chain's later requests without a request to its origin (a part refused
only for the room it had is asked for again where a request has more)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
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

#: Refusals remembered on one worker, for all run chains together (the oldest go first).
REFUSALS_KEPT = 4096


class FetchFailed(Exception):
    """Why a file was not fetched (the request leaves it out, saying so)."""

    def __init__(
        self, why: str, *, read: int = 0, too_large: bool = False, late: bool = False
    ) -> None:
        super().__init__(why)
        self.read = read
        """Body bytes read before the fetch was given up: they count all the same."""
        self.too_large = too_large
        self.late = late


@dataclass
class _Kept:
    file: FileData
    size: int
    etag: str | None
    modified: str | None
    at: float


@dataclass
class _Refused:
    why: str
    larger_than: int | None
    """Refused for its size alone: a request with more room than this asks again."""
    at: float


@dataclass
class _Allowance:
    """What is left of one request's limits as its files are fetched."""

    files: int
    bytes: int
    tokens: float | None
    chars_per_token: float
    deadline: float
    """On the event loop's clock: when the request's fetches must be done."""


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
        self._cache: OrderedDict[bytes, _Kept] = OrderedDict()
        self._cached = 0
        self._refusals: OrderedDict[bytes, _Refused] = OrderedDict()

    async def inline(
        self,
        messages: PreparedMessages,
        chain: str,
        *,
        tokens_left: float | None = None,
        chars_per_token: float = 4.0,
        left_out: list[str] | None = None,
    ) -> PreparedMessages:
        """``messages`` with each file by URL sent inline where the owner allows it and
        the limits leave space (newest first), and a marker for every other one; the
        array the session keeps is not touched. ``chain``: whose memory the files and
        refusals are (one run chain of one session). ``tokens_left``: what the context
        budget leaves for files (``None``: no budget). ``left_out``: where to say why each
        file left out was (what the model's marker says), for the session's status."""
        limits = self.limits
        deadline = asyncio.get_running_loop().time() + limits.fetch_seconds
        left = _Allowance(
            limits.max_files, limits.max_bytes, tokens_left, chars_per_token, deadline
        )
        out: list[Message] = list(messages)
        for index in range(len(out) - 1, -1, -1):
            content = getattr(out[index], "content", None)
            if not isinstance(content, list) or not any(map(_by_url, content)):
                continue
            parts = list(content)
            for k in range(len(parts) - 1, -1, -1):
                if _by_url(parts[k]):
                    parts[k] = await self._part(parts[k], chain, left)
                    if left_out is not None and isinstance(parts[k], TextPart):
                        left_out.append(parts[k].text)
            out[index] = out[index].model_copy(update={"content": parts})
        return PreparedMessages(out, messages.context, messages.left_out)

    async def _part(self, part: FilePart, chain: str, left: _Allowance) -> FilePart | TextPart:
        given = part.file.file_url or ""
        url = self._fetchable(given)
        if url is None:
            return NOT_ALLOWED
        limits = self.limits
        if left.files <= 0:
            return self._left_out(
                given,
                f"this request already took {limits.max_files} files by URL, the most "
                "this worker considers for one request (file_limits.max_files)",
            )
        left.files -= 1  # whatever becomes of it: sent, refused, or served from memory
        most, too_large = self._room(left)
        if most <= 0:
            return self._left_out(given, too_large)
        if asyncio.get_running_loop().time() >= left.deadline:
            return self._left_out(given, self._late())
        key = _key(chain, url)
        refused = self._refused(key)
        if refused is not None and (refused.larger_than is None or most <= refused.larger_than):
            return self._left_out(
                given, f"{refused.why}; refused earlier in this session, so not asked for again"
            )
        try:
            file, size = await self._fetched(key, url, most, left.deadline)
        except FetchFailed as error:
            left.bytes -= error.read
            if error.too_large:
                why, larger_than = too_large, most
            elif error.late:
                why, larger_than = self._late(), None
            else:
                why, larger_than = f"it could not be fetched ({error})", None
            self._refuse(key, _Refused(why, larger_than, self._clock()))
            return self._left_out(given, why)
        self._refusals.pop(key, None)
        left.bytes -= size
        if left.tokens is not None:
            left.tokens -= size / left.chars_per_token
        return FilePart(
            file=file.model_copy(update={"filename": part.file.filename or file.filename})
        )

    def _room(self, left: _Allowance) -> tuple[int, str]:
        """The most bytes the next file may have, and what a larger one is told: the
        least of one file's limit, the request's bytes left and what its context budget
        leaves."""
        limits = self.limits
        rooms = [
            (
                limits.max_file_bytes,
                f"it is larger than {limits.max_file_bytes} bytes, the most one file may "
                "have (file_limits.max_file_bytes)",
            ),
            (
                max(0, left.bytes),
                f"it is larger than the {max(0, left.bytes)} bytes left of the "
                f"{limits.max_bytes} this request's files may read "
                "(file_limits.max_bytes)"
                if left.bytes > 0
                else f"this request's files already read the {limits.max_bytes} bytes "
                "they may (file_limits.max_bytes)",
            ),
        ]
        if left.tokens is not None:
            room = max(0, int(left.tokens * left.chars_per_token))
            rooms.append(
                (room, f"it does not fit the request's context budget ({room} bytes left)")
            )
        return min(rooms, key=lambda found: found[0])

    def _late(self) -> str:
        seconds = self.limits.fetch_seconds
        return (
            f"it was not fetched within {seconds} s, the time all of a request's files may "
            "take (file_limits.fetch_seconds)"
        )

    def _left_out(self, url: str, why: str) -> TextPart:
        log.warning("file left out of the request", url=without_secrets(url), why=why)
        return _omitted(why)

    def _refused(self, key: bytes) -> _Refused | None:
        refused = self._refusals.get(key)
        if refused is not None and self._clock() - refused.at > self.limits.cache_seconds:
            del self._refusals[key]
            return None
        return refused

    def _refuse(self, key: bytes, refused: _Refused) -> None:
        self._refusals[key] = refused
        self._refusals.move_to_end(key)
        while len(self._refusals) > REFUSALS_KEPT:
            self._refusals.popitem(last=False)

    async def _fetched(
        self, key: bytes, url: str, most: int, deadline: float
    ) -> tuple[FileData, int]:
        """The file at ``url`` and its size: kept for this run chain and unchanged at its
        origin, or fetched now (at most ``most`` bytes, by ``deadline``)."""
        kept = self._cache.get(key)
        if kept is not None and self._clock() - kept.at > self.limits.cache_seconds:
            self._drop(key)
            kept = None
        if kept is not None and kept.size > most:
            raise FetchFailed(f"larger than {most} bytes", too_large=True)
        ask = {}
        if kept is not None and kept.etag:
            ask["If-None-Match"] = kept.etag
        if kept is not None and kept.modified:
            ask["If-Modified-Since"] = kept.modified
        try:
            got = await self._get(url, most, ask, deadline)
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
        self, url: str, most: int, ask: dict[str, str], deadline: float
    ) -> tuple[bytes, str, str | None, str | None] | None:
        """One GET by the request's deadline, no redirect followed (it could lead off the
        allowed origin), at most ``most`` bytes; ``None`` when the origin says the kept
        copy is unchanged (304)."""
        body = bytearray()
        try:
            async with (
                asyncio.timeout_at(deadline),
                httpx.AsyncClient(follow_redirects=False) as http,
                http.stream("GET", url, headers=ask) as response,
            ):
                if response.status_code == 304 and ask:
                    return None
                if response.status_code != 200:
                    raise FetchFailed(f"HTTP {response.status_code}")
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > most:
                    raise FetchFailed(f"larger than {most} bytes", too_large=True)
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > most:
                        raise FetchFailed(
                            f"larger than {most} bytes", read=len(body), too_large=True
                        )
                headers = response.headers
        except TimeoutError:
            raise FetchFailed("out of time", read=len(body), late=True) from None
        except httpx.HTTPError as error:
            raise FetchFailed(type(error).__name__, read=len(body)) from None
        kind = headers.get("content-type", "").split(";", 1)[0].strip()
        return (
            bytes(body),
            kind or "application/octet-stream",
            headers.get("etag"),
            headers.get("last-modified"),
        )

    def _keep(self, key: bytes, kept: _Kept) -> None:
        if kept.size > self.limits.cache_bytes:
            return
        self._cache[key] = kept
        self._cached += kept.size
        while self._cached > self.limits.cache_bytes:
            self._drop(next(iter(self._cache)))

    def _drop(self, key: bytes) -> None:
        self._cached -= self._cache.pop(key).size


def _key(chain: str, url: str) -> bytes:
    """What a file and a refusal are remembered by: a digest, so the worker's memory
    holds no URL a user wrote."""
    return hashlib.sha256(f"{chain}\0{url}".encode()).digest()


def _by_url(part: object) -> bool:
    return isinstance(part, FilePart) and bool(part.file.file_url) and not part.file.file_data
