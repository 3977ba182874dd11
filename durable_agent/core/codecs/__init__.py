"""Wire codecs: pure functions from the message array to request bodies and back.

No I/O and no clock, so they run inside the workflow sandbox and in tests alike. One
module per provider API (``chat``, ``responses``, ``anthropic``) and one registration
each, below; ``registry`` holds ``Codec`` and ``register_codec`` for more.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._context import ContextRules
from .._messages import AssistantMessage, Message
from .._model_options import ModelOptions, ReasoningWire
from .._tool_definition import ToolDefinition
from . import _anthropic as anthropic
from . import _chat as chat
from . import _media_apis as media_apis
from . import _responses as responses
from ._anthropic import (
    AnthropicStreamAccumulator,
    build_anthropic_request,
    parse_anthropic_message,
)
from ._chat import ChatStreamAccumulator, build_chat_request, parse_chat_completion
from ._common import StreamAccumulator, UnsupportedContentError, error_text, response_id_of
from ._media import (
    EMBEDDINGS_PATH,
    GeneratedImage,
    build_embeddings_request,
    build_image_request,
    parse_embeddings_response,
    parse_image_response,
)
from ._media_apis import IMAGES_PATH
from ._registry import Codec, codec_for, register_codec, registered_apis
from ._responses import (
    ResponsesStreamAccumulator,
    build_responses_request,
    parse_responses_response,
)
from ._schema import wire_parameters
from ._sse import SSEDecoder, SSEEvent, parse_sse

WireAPI = str
"""A registered wire API's name (``registered_apis()``): built in, ``chat``,
``responses`` and ``anthropic``."""

__all__ = [
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
    "UnsupportedContentError",
    "WireAPI",
    "build_anthropic_request",
    "build_chat_request",
    "build_embeddings_request",
    "build_image_request",
    "build_request",
    "build_responses_request",
    "codec_for",
    "error_text",
    "new_stream_accumulator",
    "parse_anthropic_message",
    "parse_chat_completion",
    "parse_embeddings_response",
    "parse_image_response",
    "parse_response",
    "parse_responses_response",
    "parse_sse",
    "register_codec",
    "registered_apis",
    "request_path",
    "response_id_of",
    "stream_to_message",
    "wire_parameters",
]


def _anthropic_auth(key: str | None) -> dict[str, str]:
    headers = {"anthropic-version": anthropic.API_VERSION}
    if key:
        headers["x-api-key"] = key
    return headers


register_codec(
    "chat",
    Codec(
        "chat",
        chat.PATH,
        build_chat_request,
        parse_chat_completion,
        ChatStreamAccumulator,
        provider_name="openai",
        sends_reasoning=True,
    ),
)
register_codec(
    "responses",
    Codec(
        "responses",
        responses.PATH,
        build_responses_request,
        parse_responses_response,
        ResponsesStreamAccumulator,
        provider_name="openai",
    ),
)
register_codec(
    "embeddings",
    Codec(
        "embeddings",
        media_apis.EMBEDDINGS_PATH,
        media_apis.build_embeddings_turn,
        media_apis.parse_embeddings_turn,
        ChatStreamAccumulator,  # never used: these requests do not stream
        provider_name="openai",
        operation="embeddings",
    ),
)
register_codec(
    "images",
    Codec(
        "images",
        media_apis.IMAGES_PATH,
        media_apis.build_image_turn,
        media_apis.parse_image_turn,
        ChatStreamAccumulator,  # never used: these requests do not stream
        provider_name="openai",
        operation="generate_content",
    ),
)
register_codec(
    "anthropic",
    Codec(
        "anthropic",
        anthropic.PATH,
        build_anthropic_request,
        parse_anthropic_message,
        AnthropicStreamAccumulator,
        provider_name="anthropic",
        auth=_anthropic_auth,
    ),
)


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
    """The request body for ``api`` (``codec_for(api).build_request``)."""
    return codec_for(api).build_request(
        messages,
        model=model,
        tools=tools,
        options=options,
        output_schema=output_schema,
        reasoning=reasoning,
        stream=stream,
        context=context,
    )


def request_path(api: str) -> str:
    """Path appended to the endpoint's base URL (which includes ``/v1``)."""
    return codec_for(api).path


def parse_response(api: str, body: dict[str, Any]) -> AssistantMessage:
    return codec_for(api).parse_response(body)


def new_stream_accumulator(api: str) -> StreamAccumulator:
    return codec_for(api).new_stream_accumulator()


def stream_to_message(api: str, chunks: Sequence[bytes]) -> AssistantMessage:
    """A recorded SSE byte stream (split anywhere) as the assistant message it yields."""
    accumulator = new_stream_accumulator(api)
    for event in parse_sse(chunks):
        accumulator.add(event)
    return accumulator.finish()
