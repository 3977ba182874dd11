"""Wire codecs: pure functions from the message array to request bodies and back.

No I/O and no clock, so they run inside the workflow sandbox and in tests alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from durable_agent.codecs import anthropic, chat, responses
from durable_agent.codecs.anthropic import (
    AnthropicStreamAccumulator,
    build_anthropic_request,
    parse_anthropic_message,
)
from durable_agent.codecs.chat import (
    ChatStreamAccumulator,
    build_chat_request,
    parse_chat_completion,
)
from durable_agent.codecs.common import (
    SHAPE_ERRORS,
    StreamAccumulator,
    UnsupportedContentError,
    finish_message,
)
from durable_agent.codecs.media import (
    GeneratedImage,
    build_embeddings_request,
    build_image_request,
    parse_embeddings_response,
    parse_image_response,
)
from durable_agent.codecs.responses import (
    ResponsesStreamAccumulator,
    build_responses_request,
    parse_responses_response,
)
from durable_agent.codecs.sse import SSEDecoder, SSEEvent, parse_sse
from durable_agent.messages import AssistantMessage, Message
from durable_agent.model_options import ModelOptions, ReasoningWire
from durable_agent.tool_definition import ToolDefinition

WireAPI = Literal["chat", "responses", "anthropic"]

__all__ = [
    "AnthropicStreamAccumulator",
    "ChatStreamAccumulator",
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
    "new_stream_accumulator",
    "parse_anthropic_message",
    "parse_chat_completion",
    "parse_embeddings_response",
    "parse_image_response",
    "parse_response",
    "parse_responses_response",
    "parse_sse",
    "request_path",
    "stream_to_message",
]


def build_request(
    api: WireAPI,
    messages: Sequence[Message],
    *,
    model: str,
    tools: Sequence[ToolDefinition] = (),
    options: ModelOptions | None = None,
    output_schema: dict[str, Any] | None = None,
    reasoning: ReasoningWire | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """The request body for ``api``; every builder applies ``prepare_request_messages``."""
    if api == "chat":
        return build_chat_request(
            messages,
            model=model,
            tools=tools,
            options=options,
            output_schema=output_schema,
            reasoning=reasoning,
            stream=stream,
        )
    if api not in ("responses", "anthropic"):
        raise ValueError(f"unknown wire API {api!r}: use chat, responses or anthropic")
    builder = build_responses_request if api == "responses" else build_anthropic_request
    return builder(
        messages,
        model=model,
        tools=tools,
        options=options,
        output_schema=output_schema,
        stream=stream,
    )


def request_path(api: WireAPI) -> str:
    """Path appended to the endpoint's base URL (which includes ``/v1``)."""
    return {"chat": chat.PATH, "responses": responses.PATH, "anthropic": anthropic.PATH}[api]


def parse_response(api: WireAPI, body: dict[str, Any]) -> AssistantMessage:
    """A whole response as one assistant message; one of an unexpected shape becomes an
    ``is_error`` message (a failed turn, retried), never an exception."""
    parse = {
        "chat": parse_chat_completion,
        "responses": parse_responses_response,
        "anthropic": parse_anthropic_message,
    }[api]
    try:
        return parse(body)
    except SHAPE_ERRORS as error:
        reason = f"unexpected response shape ({error!r}): {str(body)[:200]}"
        return finish_message(content="", tool_calls=[], malformed=[], error=reason)


def new_stream_accumulator(api: WireAPI) -> StreamAccumulator:
    if api == "chat":
        return ChatStreamAccumulator()
    if api == "responses":
        return ResponsesStreamAccumulator()
    return AnthropicStreamAccumulator()


def stream_to_message(api: WireAPI, chunks: Sequence[bytes]) -> AssistantMessage:
    """A recorded SSE byte stream (split anywhere) as the assistant message it yields."""
    accumulator = new_stream_accumulator(api)
    for event in parse_sse(chunks):
        accumulator.add(event)
    return accumulator.finish()
