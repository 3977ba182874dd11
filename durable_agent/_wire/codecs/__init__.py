"""Wire codecs: pure functions from the message array to request bodies and back.

No I/O and no clock, so they run inside the workflow sandbox and in tests alike. One
module per provider API (``chat``, ``responses``, ``anthropic``, and the media APIs)
and one entry each in ``BUILT_IN_CODECS``, below; a worker speaks more when its owner
adds a ``Codec`` to the worker's ``Registry``.

Its modules:

- ``protocol``: what a wire API is (``Codec``), and ``WireCodec``, one made of functions.
- ``chat``: OpenAI Chat Completions, the reference wire.
- ``responses``: OpenAI's Responses API.
- ``anthropic``: Anthropic's Messages API.
- ``media``: OpenAI embeddings and image generation, as wire APIs too.
- ``common``: what every codec shares: options, ids, usage, schemas, the SSE parser.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from durable_agent._wire.codecs import anthropic, chat, media, responses
from durable_agent._wire.codecs.anthropic import (
    AnthropicStreamAccumulator,
    build_anthropic_request,
    joined_turn,
    parse_anthropic_message,
)
from durable_agent._wire.codecs.chat import (
    ChatStreamAccumulator,
    build_chat_request,
    parse_chat_completion,
)
from durable_agent._wire.codecs.common import (
    SSEDecoder,
    SSEEvent,
    StreamAccumulator,
    UnsupportedContentError,
    error_text,
    parse_sse,
    response_id_of,
    wire_parameters,
)
from durable_agent._wire.codecs.media import (
    EMBEDDINGS_PATH,
    IMAGES_PATH,
    GeneratedImage,
    build_embeddings_request,
    build_image_request,
    parse_embeddings_response,
    parse_image_response,
)
from durable_agent._wire.codecs.protocol import (
    Codec,
    StreamingCodec,
    StreamingWireCodec,
    WireCodec,
    bearer_auth,
    built_by,
    hosted_by,
    output_cap_of,
    reply_body_of,
    reply_events_of,
)
from durable_agent._wire.codecs.responses import (
    ResponsesStreamAccumulator,
    build_responses_request,
    parse_responses_response,
)
from durable_agent._wire.context import ContextRules
from durable_agent._wire.messages import AssistantMessage, Message, ToolDefinition
from durable_agent._wire.options import ModelOptions, ProviderCompaction, ReasoningWire
from durable_agent._wire.outgoing import PartKind

WireAPI = str
"""A wire API's name: built in, ``chat``, ``responses``, ``anthropic``, ``embeddings``
and ``images``; a worker's ``Registry`` may add more."""

DEFAULT_API: WireAPI = "chat"
"""The wire an endpoint speaks when it names none, and the one a message is judged by
when the session cannot see its endpoint's codec (a registered name, an owner's wire)."""

__all__ = [
    "BUILT_IN_CODECS",
    "DEFAULT_API",
    "EMBEDDINGS_PATH",
    "IMAGES_PATH",
    "AnthropicStreamAccumulator",
    "ChatStreamAccumulator",
    "Codec",
    "GeneratedImage",
    "ResponsesStreamAccumulator",
    "SSEDecoder",
    "SSEEvent",
    "StreamAccumulator",
    "StreamingCodec",
    "StreamingWireCodec",
    "UnsupportedContentError",
    "WireAPI",
    "WireCodec",
    "ask_compaction_of",
    "bearer_auth",
    "build_anthropic_request",
    "build_chat_request",
    "build_embeddings_request",
    "build_image_request",
    "build_request",
    "build_responses_request",
    "built_by",
    "built_in_codec",
    "compaction_headers",
    "continued_request_of",
    "error_text",
    "hosted_by",
    "joined_turn",
    "new_stream_accumulator",
    "output_cap_of",
    "parse_anthropic_message",
    "parse_chat_completion",
    "parse_embeddings_response",
    "parse_image_response",
    "parse_response",
    "parse_responses_response",
    "parse_sse",
    "reply_body_of",
    "reply_events_of",
    "request_path",
    "response_id_of",
    "stream_to_message",
    "wire_parameters",
    "wire_takes",
]


def _anthropic_auth(key: str | None) -> dict[str, str]:
    headers = {"anthropic-version": anthropic.API_VERSION}
    if key:
        headers["x-api-key"] = key
    return headers


BUILT_IN_CODECS: Mapping[str, Codec] = MappingProxyType(
    {
        codec.api: codec
        for codec in (
            StreamingWireCodec(
                "chat",
                chat.PATH,
                build_chat_request,
                parse_chat_completion,
                ChatStreamAccumulator,
                provider_name="openai",
                sends_reasoning=True,
                takes=chat.TAKES,
                takes_file_urls=False,  # a file goes inline or by id, never by URL
                caches_prompts=True,
                json_object=chat.ask_chat_json_object,
                builds=chat.BUILT,
                output_cap=chat.OUTPUT_CAP,
                reply=chat.chat_reply_body,
                reply_events=chat.chat_reply_events,
            ),
            StreamingWireCodec(
                "responses",
                responses.PATH,
                build_responses_request,
                parse_responses_response,
                ResponsesStreamAccumulator,
                provider_name="openai",
                takes=responses.TAKES,
                takes_file_urls=True,
                caches_prompts=True,
                json_object=responses.ask_responses_json_object,
                builds=responses.BUILT,
                output_cap=responses.OUTPUT_CAP,
                reply=responses.responses_reply_body,
                reply_events=responses.responses_reply_events,
                hosted=responses.HOSTED_TOOLS,
            ),
            WireCodec(
                "embeddings",
                media.EMBEDDINGS_PATH,
                media.build_embeddings_turn,
                media.parse_embeddings_turn,
                provider_name="openai",
                operation="embeddings",
                builds=media.EMBEDDINGS_BUILT,
            ),
            WireCodec(
                "images",
                media.IMAGES_PATH,
                media.build_image_turn,
                media.parse_image_turn,
                provider_name="openai",
                operation="generate_content",
                output_type="image",
                builds=media.IMAGES_BUILT,
            ),
            StreamingWireCodec(
                "anthropic",
                anthropic.PATH,
                build_anthropic_request,
                parse_anthropic_message,
                AnthropicStreamAccumulator,
                provider_name="anthropic",
                auth=_anthropic_auth,
                takes=anthropic.TAKES,
                takes_file_urls=True,
                caches_prompts=True,
                builds=anthropic.BUILT,
                output_cap=anthropic.OUTPUT_CAP,
                reply=anthropic.anthropic_reply_body,
                reply_events=anthropic.anthropic_reply_events,
                hosted=anthropic.HOSTED_TOOLS,
            ),
        )
    }
)
"""The wire APIs every worker speaks, by name (read-only: a worker's ``Registry``
starts from these and its owner adds more)."""


def built_in_codec(api: str) -> Codec:
    """The built-in codec of ``api``; ``ValueError`` naming the built-in ones for any
    other (a worker's own are its ``Registry``'s: ``Registry.codec``)."""
    found = BUILT_IN_CODECS.get(api)
    if found is None:
        known = ", ".join(sorted(BUILT_IN_CODECS))
        raise ValueError(f"{api!r} is not a built-in wire API (built in: {known})")
    return found


def wire_takes(api: str | None) -> frozenset[PartKind]:
    """The kinds of part the built-in wire ``api`` carries; for a wire the caller cannot
    see the codec of (``None``: a registered endpoint's name; an owner's wire), the
    default wire's (the worker's own codec leaves out what its wire does not carry)."""
    found = BUILT_IN_CODECS.get(api or DEFAULT_API) or BUILT_IN_CODECS[DEFAULT_API]
    return found.takes


def build_request(
    api: str,
    messages: Sequence[Message],
    *,
    model: str,
    tools: Sequence[ToolDefinition] = (),
    options: ModelOptions | None = None,
    output_schema: dict[str, Any] | None = None,
    reasoning: ReasoningWire | None = None,
    stream: bool = False,
    context: ContextRules | None = None,
) -> dict[str, Any]:
    """The request body for the built-in ``api`` (``Codec.build_request``)."""
    return built_in_codec(api).build_request(
        messages,
        model=model,
        tools=tools,
        options=options,
        output_schema=output_schema,
        reasoning=reasoning,
        stream=stream,
        context=context,
    )


#: How each built-in wire asks for the provider's own compaction (the others have none).
_COMPACTION_ASKS = {
    "responses": responses.ask_compaction,
    "anthropic": anthropic.ask_context_management,
}


def ask_compaction_of(codec: Codec, body: dict[str, Any], settings: ProviderCompaction) -> None:
    """Put the provider's compaction the owner chose into ``body`` (a wire without one,
    such as Chat Completions, is left as it is: the project's own compaction runs)."""
    ask = _COMPACTION_ASKS.get(codec.api)
    if ask is not None and codec is BUILT_IN_CODECS.get(codec.api):
        ask(body, settings)


def continued_request_of(
    codec: Codec, body: dict[str, Any], so_far: AssistantMessage
) -> dict[str, Any] | None:
    """The request that lets a reply the provider paused go on (Anthropic's
    ``pause_turn``: ``anthropic.continued_request``); ``None`` when the reply is whole,
    or its wire never pauses. ``joined_turn`` joins the continuation to it."""
    if codec.api == "anthropic" and codec is BUILT_IN_CODECS.get(codec.api):
        return anthropic.continued_request(body, so_far)
    return None


def compaction_headers(api: str, settings: ProviderCompaction | None) -> dict[str, str]:
    """The headers the owner's compaction settings need on ``api``'s requests: Anthropic
    names its betas (``anthropic-beta``)."""
    if api != "anthropic" or settings is None or not settings.provider_runs:
        return {}
    betas = anthropic.context_management_betas(settings)
    return {"anthropic-beta": ",".join(betas)} if betas else {}


def request_path(api: str) -> str:
    """Path appended to the endpoint's base URL (which includes ``/v1``)."""
    return built_in_codec(api).path


def parse_response(api: str, body: dict[str, Any]) -> AssistantMessage:
    return built_in_codec(api).parse_response(body)


def new_stream_accumulator(api: str) -> StreamAccumulator:
    codec = built_in_codec(api)
    if not isinstance(codec, StreamingCodec):
        raise ValueError(f"wire API {api!r} does not stream")
    return codec.new_stream_accumulator()


def stream_to_message(api: str, chunks: Sequence[bytes]) -> AssistantMessage:
    """A recorded SSE byte stream (split anywhere) as the assistant message it yields."""
    accumulator = new_stream_accumulator(api)
    for event in parse_sse(chunks):
        accumulator.add(event)
    return accumulator.finish()
