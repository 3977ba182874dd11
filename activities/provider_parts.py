"""What a request hands the model server to fetch or to look up: images and files by
URL, and the provider's own file ids. A session's messages choose both, so each goes
only where the worker's owner allows (``Capabilities.endpoint_rules``).

A URL reaches the model server when ``file_origins`` allows it (as checked: escapes and
dot segments resolved), or, unless the endpoint's rules say ``only_file_origins``,
when every address its host resolves to is public. What is handed on is the URL as
this worker read it, rebuilt (``canonical_url``); a URL another reader might read
otherwise (a backslash, user info, a host written as a number) is not handed on.

The server fetches what it is handed from where it runs: a hosted provider from the
internet, but a self-hosted one (vLLM, llama.cpp) from inside the owner's network, so
for an endpoint on a private address only ``file_origins`` count unless its owner says
otherwise. What the server does with a public URL is its own (it may follow a
redirect, or resolve the name again and get another answer), so for a server inside
the owner's network, whatever its address, ``only_file_origins`` is the setting that
holds. A provider file id goes only when the owner lists it: an id is all it takes to
read an upload, and the provider cannot tell one user's from another's. Anything else
is left out of the request with a marker the model reads, as a file the worker may
not fetch is."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import structlog

from durable_agent._spec._endpoint import ProviderEndpoint
from durable_agent._wire._messages import (
    ContentPart,
    FilePart,
    ImagePart,
    ImageURL,
    Message,
    TextPart,
    UserMessage,
)
from durable_agent._wire._request_messages import PreparedMessages
from durable_agent.capabilities import Capabilities
from durable_agent.capabilities._registry import EndpointRules
from durable_agent.capabilities._urls import canonical_url, check_url

log = structlog.get_logger()

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
