"""Model providers over HTTP (httpx): one request, streamed or whole, in the wire format
the endpoint speaks, and the endpoint the environment describes.

``model_from_environment`` reads a model endpoint from the usual environment variables
(for the demo and the CLI). ``ProviderClient`` sends requests (chat turns, embeddings,
images) and its errors say whether a later attempt may succeed (``is_retryable_status``,
``parse_retry_after``). An API key is read from the environment at request time, so it
never enters a message, a spec, a workflow payload or a log line."""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import httpx

from durable_agent._errors import DurableAgentError
from durable_agent._observability.tracing import embeddings_span, image_span, record_embeddings
from durable_agent._spec.document import ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._spec.secret_values import redact
from durable_agent._wire.codecs import (
    EMBEDDINGS_PATH,
    IMAGES_PATH,
    Codec,
    GeneratedImage,
    SSEDecoder,
    SSEEvent,
    StreamingCodec,
    build_embeddings_request,
    build_image_request,
    built_in_codec,
    compaction_headers,
    error_text,
    parse_embeddings_response,
    parse_image_response,
    response_id_of,
)
from durable_agent._wire.messages import AssistantMessage, UserMessage
from durable_agent._wire.options import ModelOptions

# A model endpoint from the usual environment variables, for the demo and the CLI.

DEFAULT_MODEL = "gpt-4o-mini"


def model_from_environment(environ: Mapping[str, str] | None = None) -> ModelSpec | None:
    """OpenAI (``OPENAI_API_KEY``) or any OpenAI-compatible server (``OPENAI_BASE_URL``,
    key optional); the model id from ``DURABLE_AGENT_MODEL``. ``None`` when neither is set."""
    env = os.environ if environ is None else environ
    key, base_url = env.get("OPENAI_API_KEY"), env.get("OPENAI_BASE_URL")
    if not key and not base_url:
        return None
    endpoint = ProviderEndpoint(
        base_url=base_url or "https://api.openai.com/v1",
        api_key_env="OPENAI_API_KEY" if key else None,
    )
    return ModelSpec(name=env.get("DURABLE_AGENT_MODEL", DEFAULT_MODEL), endpoint=endpoint)


# The HTTP client that talks to model providers (``ProviderEndpoint``, re-exported
# here, is pure configuration in ``durable_agent._spec.endpoints``).
#
# One pooled ``httpx.AsyncClient`` per process (per event loop). The API key is
# read from the environment variable an endpoint names, at request time, so it
# never enters a message, a spec, a workflow payload or a log line.

USER_AGENT = f"durable-agent/{version('durable-agent')}"
RETRYABLE_STATUS = frozenset({408, 409, 429})


class ProviderError(DurableAgentError):
    """A provider call that failed, classified for retry.

    ``retryable`` follows the status: 408/409/429/5xx and transport failures may
    succeed on a later attempt; other 4xx never will. ``retry_after`` carries the
    provider's ``Retry-After`` in seconds when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status_code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status_code = status_code
        self.retry_after = retry_after


#: The largest reply a model call returns: one activity result must hold it (Temporal
#: refuses payloads over 2 MB, and a refused result would be retried as lost work).
MAX_REPLY_BYTES = 1_500_000
#: How much larger than the reply its stream may be: each chunk repeats an envelope
#: (ids, the model, indexes), so a 250 KB reply of 2,500 calls streams as 2.2 MB.
STREAM_FRAMING = 4


class ReplyTooLarge(ProviderError):
    """A reply over the size one activity result can carry (a model attempt's failure:
    another attempt may answer shorter)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


def _within(message: AssistantMessage, max_bytes: int) -> AssistantMessage:
    size = len(message.model_dump_json(exclude_none=True))
    if size > max_bytes:
        raise ReplyTooLarge(
            f"the reply is {size} bytes, over the {max_bytes} one activity result holds"
        )
    return message


class ProviderConfigurationError(ProviderError):
    """A call that cannot be made as configured (the key's variable is not set): no
    retry can fix it, so it fails at once."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or status >= 500


def parse_retry_after(headers: httpx.Headers, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait, from ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())


def _status_error(url: str, response: httpx.Response, body: bytes) -> ProviderError:
    try:
        said = error_text(json.loads(body))
    except ValueError:
        said = body.decode("utf-8", "replace").strip()[:500] or "(empty body)"
    said = redact(said, _sent_keys(response), marker="[{name}]")  # a body may quote the key
    status = response.status_code
    return ProviderError(
        f"{url} returned {status} {response.reason_phrase}: {said}",
        retryable=is_retryable_status(status),
        status_code=status,
        retry_after=parse_retry_after(response.headers),
    )


#: Request headers that carry a provider's key.
KEY_HEADERS = ("authorization", "x-api-key", "api-key")


def _sent_keys(response: httpx.Response) -> dict[str, str]:
    """The key values the request carried, by the header that carried them."""
    sent: dict[str, str] = {}
    for header in KEY_HEADERS:
        value = response.request.headers.get(header) if response.request else None
        if value:
            sent[f"{header} value"] = value.removeprefix("Bearer ").strip()
    return sent


def _transport_error(url: str, error: httpx.TransportError) -> ProviderError:
    detail = str(error) or "connection closed by the server"
    return ProviderError(
        f"transport failure talking to {url}: {type(error).__name__}: {detail}",
        retryable=True,
    )


class ProviderClient:
    """Sends request bodies to an endpoint and returns assistant messages. Each call
    speaks ``codec`` (by default, the built-in codec the endpoint's ``api`` names; a
    worker passes the one its ``Registry`` holds)."""

    def __init__(self, http: httpx.AsyncClient | None = None) -> None:
        self._http = http or httpx.AsyncClient(
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20),
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def _headers(self, endpoint: ProviderEndpoint, codec: Codec) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT, **endpoint.headers}
        key = None
        if endpoint.api_key_env:
            key = os.environ.get(endpoint.api_key_env)
            if not key:
                raise ProviderConfigurationError(
                    f"environment variable {endpoint.api_key_env} is not set; it holds the "
                    f"API key for {endpoint.base_url} (named by api_key_env)"
                )
        headers.update(codec.auth_headers(key))
        for name, value in compaction_headers(codec.api, endpoint.compaction).items():
            # added to the betas the endpoint's own header names, never in their place
            key = next((k for k in headers if k.lower() == name), name)
            named = [b.strip() for b in headers.get(key, "").split(",") if b.strip()]
            headers[key] = ",".join([*named, *(b for b in value.split(",") if b not in named)])
        return headers

    def _timeout(self, endpoint: ProviderEndpoint) -> httpx.Timeout:
        return httpx.Timeout(endpoint.read_timeout, connect=endpoint.connect_timeout)

    async def post_json(
        self,
        endpoint: ProviderEndpoint,
        body: dict[str, Any],
        path: str | None = None,
        *,
        codec: Codec | None = None,
    ) -> dict[str, Any]:
        """POST ``body`` (to the API's path, or ``path`` under the base URL) and return
        the JSON response; raises :class:`ProviderError`."""
        codec = codec or built_in_codec(endpoint.api)
        url = endpoint.base_url + (path or codec.path)
        try:
            response = await self._http.post(
                url,
                json=body,
                headers=self._headers(endpoint, codec),
                timeout=self._timeout(endpoint),
            )
        except httpx.TransportError as error:
            raise _transport_error(url, error) from error
        if response.status_code >= 400:
            raise _status_error(url, response, response.content)
        try:
            data = response.json()
        except ValueError as error:
            raise ProviderError(
                f"{url} returned malformed JSON: {response.text[:200]!r}", retryable=True
            ) from error
        if not isinstance(data, dict):
            raise ProviderError(f"{url} returned JSON that is not an object", retryable=True)
        return data

    async def stream_events(
        self, endpoint: ProviderEndpoint, body: dict[str, Any], *, codec: Codec | None = None
    ) -> AsyncIterator[SSEEvent]:
        """POST ``body`` and yield its server-sent events as they arrive.

        An error status raises before any event; a transport failure mid-stream
        raises :class:`ProviderError` (retryable) after the events already read.
        """
        codec = codec or built_in_codec(endpoint.api)
        url = endpoint.base_url + codec.path
        decoder = SSEDecoder()
        try:
            async with self._http.stream(
                "POST",
                url,
                json=body,
                headers={**self._headers(endpoint, codec), "Accept": "text/event-stream"},
                timeout=self._timeout(endpoint),
            ) as response:
                if response.status_code >= 400:
                    raise _status_error(url, response, await response.aread())
                async for chunk in response.aiter_bytes():
                    for event in decoder.feed(chunk):
                        yield event
            for event in decoder.close():
                yield event
        except httpx.TransportError as error:
            raise _transport_error(url, error) from error

    async def complete(
        self,
        endpoint: ProviderEndpoint,
        body: dict[str, Any],
        *,
        codec: Codec | None = None,
        on_text: Callable[[str], None] | None = None,
        on_reasoning: Callable[[str], None] | None = None,
        facts: ResponseFacts | None = None,
        max_bytes: int = MAX_REPLY_BYTES,
    ) -> AssistantMessage:
        """One model turn: streams when ``body["stream"]`` is true, else a single response.

        Status errors raise :class:`ProviderError`; a stream that breaks, comes back
        blank or never completes returns an assistant message with ``is_error``. A
        reply over ``max_bytes`` raises :class:`ReplyTooLarge`, which a retry may avoid;
        a stream stops being read (or paid for) once it passes ``STREAM_FRAMING``
        times that.
        """
        codec = codec or built_in_codec(endpoint.api)
        if not body.get("stream"):
            whole = await self.post_json(endpoint, body, codec=codec)
            if facts is not None and isinstance(whole, dict):
                facts.response_id = response_id_of(whole)
            return _within(codec.parse_response(whole), max_bytes)
        if not isinstance(codec, StreamingCodec):
            raise ProviderConfigurationError(
                f"wire API {codec.api!r} does not stream: set the model's stream to false"
            )
        accumulator = codec.new_stream_accumulator()
        read, wire_limit = 0, max_bytes * STREAM_FRAMING
        try:
            async for event in self.stream_events(endpoint, body, codec=codec):
                read += len(event.data)
                if read > wire_limit:
                    raise ReplyTooLarge(
                        f"the streamed reply passed {wire_limit} bytes: not read further "
                        f"(one activity result holds {max_bytes})"
                    )
                text = accumulator.add(event)
                if text and on_text is not None:
                    on_text(text)
                reasoning = accumulator.take_reasoning()
                if reasoning and on_reasoning is not None:
                    on_reasoning(reasoning)
        except ReplyTooLarge:
            raise
        except ProviderError as error:
            if error.status_code is not None or not error.retryable:
                raise  # a status or a configuration error, not a broken stream
            accumulator.fail(error.message)
        if facts is not None:
            facts.response_id = accumulator.response_id
        return _within(accumulator.finish(), max_bytes)


@dataclass
class ResponseFacts:
    """What a call learned beyond the message (for its trace span)."""

    response_id: str | None = None


async def embed(
    client: ProviderClient,
    endpoint: ProviderEndpoint,
    model: str,
    texts: Sequence[str],
    options: ModelOptions | None = None,
) -> list[list[float]]:
    """Embeddings of ``texts`` (OpenAI's ``/embeddings``), one vector per
    text, in an ``embeddings`` span (for tools that search or compare)."""
    body = build_embeddings_request(
        [UserMessage(content=text) for text in texts], model=model, options=options
    )
    with embeddings_span(model, len(texts)) as span:
        whole = await client.post_json(endpoint, body, path=EMBEDDINGS_PATH)
        record_embeddings(span, whole)
    return parse_embeddings_response(whole)


async def generate_image(
    client: ProviderClient,
    endpoint: ProviderEndpoint,
    model: str,
    prompt: str,
    options: ModelOptions | None = None,
) -> list[GeneratedImage]:
    """Images for ``prompt`` (OpenAI's ``/images/generations``; the
    options carry size, quality and ``n``), in a ``generate_content`` span."""
    body = build_image_request([UserMessage(content=prompt)], model=model, options=options)
    with image_span(model) as span:
        whole = await client.post_json(endpoint, body, path=IMAGES_PATH)
        images = parse_image_response(whole)
        span.set_attribute("gen_ai.response.image_count", len(images))
    return images


_shared: dict[asyncio.AbstractEventLoop, ProviderClient] = {}


def shared_client() -> ProviderClient:
    """The process's pooled client for the running event loop."""
    loop = asyncio.get_running_loop()
    for stale in [lp for lp in _shared if lp.is_closed()]:
        del _shared[stale]
    client = _shared.get(loop)
    if client is None:
        client = _shared[loop] = ProviderClient()
    return client
