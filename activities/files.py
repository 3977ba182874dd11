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
only for the room it had is asked for again where a request has more).

Beside fetching: what a request hands the model server to fetch or look up itself
(images and files by URL, the provider's file ids), each only where the owner allows
(``ProviderParts``)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import urlsplit

import httpx
import structlog

from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._wire.messages import (
    ContentPart,
    FileData,
    FilePart,
    ImagePart,
    ImageURL,
    Message,
    TextPart,
    UserMessage,
)
from durable_agent._wire.outgoing import PreparedMessages
from durable_agent.capabilities import Capabilities, FileLimits
from durable_agent.capabilities._registry import EndpointRules
from durable_agent.capabilities._urls import canonical_url, check_url, without_secrets

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


# What a request hands the model server to fetch or to look up: images and files by
# URL, and the provider's own file ids. A session's messages choose both, so each goes
# only where the worker's owner allows (``Capabilities.endpoint_rules``).
#
# A URL reaches the model server when ``file_origins`` allows it (as checked: escapes and
# dot segments resolved), or, unless the endpoint's rules say ``only_file_origins``,
# when every address its host resolves to is public. What is handed on is the URL as
# this worker read it, rebuilt (``canonical_url``); a URL another reader might read
# otherwise (a backslash, user info, a host written as a number) is not handed on.
#
# The server fetches what it is handed from where it runs: a hosted provider from the
# internet, but a self-hosted one (vLLM, llama.cpp) from inside the owner's network, so
# for an endpoint on a private address only ``file_origins`` count unless its owner says
# otherwise. What the server does with a public URL is its own (it may follow a
# redirect, or resolve the name again and get another answer), so for a server inside
# the owner's network, whatever its address, ``only_file_origins`` is the setting that
# holds. A provider file id goes only when the owner lists it: an id is all it takes to
# read an upload, and the provider cannot tell one user's from another's. Anything else
# is left out of the request with a marker the model reads, as a file the worker may
# not fetch is.


IMAGE_URL_LEFT_OUT = TextPart(
    text="[image omitted: this worker does not hand the model server that URL]"
)
FILE_URL_LEFT_OUT = TextPart(
    text="[file omitted: this worker does not hand the model server that URL]"
)
IMAGE_ID_LEFT_OUT = TextPart(
    text="[image omitted: this worker does not send that provider file id]"
)
FILE_ID_LEFT_OUT = TextPart(text="[file omitted: this worker does not send that provider file id]")

PublicCheck = Callable[[str], Awaitable[bool]]
"""Whether every address a URL's host resolves to is public."""


async def resolves_public(url: str) -> bool:
    """Whether ``url``'s host is a public one (a name that does not resolve is not)."""
    try:
        await check_url(url, private_allowed=False)
    except ValueError:  # (UrlRefused, or a port that is not a number)
        return False
    return True


class ProviderParts:
    def __init__(self, capabilities: Capabilities, public: PublicCheck = resolves_public) -> None:
        """``public``: how a URL's host is found public (resolving it, by default)."""
        self.capabilities = capabilities
        self._public = public
        self._private_servers: dict[str, bool] = {}

    async def guarded(
        self,
        messages: PreparedMessages,
        endpoint: ProviderEndpoint | str,
        target: ProviderEndpoint,
        left_out: list[str] | None = None,
    ) -> PreparedMessages:
        """``messages`` with every URL and provider file id the owner does not let
        ``endpoint`` (as the spec names it; ``target``: where it resolved) be handed
        replaced by a marker; the array the session keeps is not touched. ``left_out``:
        where to put each marker's words, for the session's status."""
        rules = self.capabilities.rules_for(endpoint)
        request = _Request(self, rules, target)
        out: list[Message] = list(messages)
        changed = 0
        for index, message in enumerate(out):
            if not isinstance(message, UserMessage) or not isinstance(message.content, list):
                continue
            parts = [await request.part(part) for part in message.content]
            if parts != message.content:
                changed += sum(a is not b for a, b in zip(parts, message.content, strict=True))
                out[index] = message.model_copy(update={"content": parts})
        if request.left_out:
            log.warning("parts left out of the request", left_out=len(request.left_out))
            if left_out is not None:
                left_out.extend(request.left_out)
        if not changed:
            return messages
        return PreparedMessages(out, messages.context, messages.left_out)

    async def only_file_origins(self, rules: EndpointRules, target: ProviderEndpoint) -> bool:
        """The endpoint's rule, or by default whether its server is on a private address."""
        if rules.only_file_origins is not None:
            return rules.only_file_origins
        base = target.base_url
        if base not in self._private_servers:
            self._private_servers[base] = not await self._public(base)
        return self._private_servers[base]

    async def public(self, url: str) -> bool:
        return await self._public(url)


class _Request:
    """One request's checks: a host asked about once however many parts name it."""

    def __init__(self, parts: ProviderParts, rules: EndpointRules, target: ProviderEndpoint):
        self._parts, self._rules, self._target = parts, rules, target
        self._hosts: dict[str, bool] = {}
        self._only_origins: bool | None = None
        self.left_out: list[str] = []
        """The markers' words, one for each part left out."""

    async def part(self, part: ContentPart) -> ContentPart:
        if isinstance(part, ImagePart):
            if part.image_url is None:
                return self._id(part.file_id, part, IMAGE_ID_LEFT_OUT)
            url = part.image_url.url
            if url.startswith("data:"):
                return part
            handed = await self._url(url)
            if handed is None:
                return self._out(IMAGE_URL_LEFT_OUT)
            return part.model_copy(
                update={"image_url": ImageURL(url=handed, detail=part.image_url.detail)}
            )
        if isinstance(part, FilePart):
            return await self._file(part)
        return part

    async def _file(self, part: FilePart) -> FilePart | TextPart:
        """A file part with only the references the server may have. One that also
        carries its bytes (``file_data``) keeps them without the others: a wire sends
        every field of the part, so an id or a URL beside the bytes would go too."""
        file, inline = part.file, bool(part.file.file_data)
        if file.file_id and file.file_id not in self._rules.file_ids:
            if not inline:
                return self._out(FILE_ID_LEFT_OUT)
            file = file.model_copy(update={"file_id": None})
        if file.file_url:
            handed = await self._url(file.file_url)
            if handed is None and not inline:
                return self._out(FILE_URL_LEFT_OUT)
            file = file.model_copy(update={"file_url": handed})
        return part if file == part.file else FilePart(file=file)

    def _id(self, file_id: str | None, part: ContentPart, marker: TextPart) -> ContentPart:
        return part if file_id in self._rules.file_ids else self._out(marker)

    def _out(self, marker: TextPart) -> TextPart:
        self.left_out.append(marker.text)
        return marker

    async def _url(self, url: str) -> str | None:
        """The URL to hand the server (the one ``file_origins`` allowed, as checked, or
        the URL rebuilt from what this worker read of it), or ``None`` when it may not
        have it."""
        allowed = self._parts.capabilities.file_fetchable(url)
        if allowed is not None:
            return allowed
        if self._only_origins is None:
            self._only_origins = await self._parts.only_file_origins(self._rules, self._target)
        if self._only_origins:
            return None
        rebuilt = canonical_url(url)
        if rebuilt is None:
            return None
        host = urlsplit(rebuilt).hostname or ""
        if host not in self._hosts:
            self._hosts[host] = await self._parts.public(rebuilt)
        return rebuilt if self._hosts[host] else None
