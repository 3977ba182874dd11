"""Wire codecs: pure functions from the message array to request bodies and back.

No I/O and no clock, so they run inside the workflow sandbox and in tests alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from durable_agent.context import ContextRules
from durable_agent.messages import AssistantMessage, Message
from durable_agent.model_options import ModelOptions, ReasoningWire
from durable_agent.request_messages import prepare_request_messages
from durable_agent.tool_definition import ToolDefinition

WireAPI = Literal["chat", "responses", "anthropic"]

__all__ = [
    "CODECS",
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


class Codec:
    """One provider API on the wire: its path, how a request body is built, how a whole
    response or a stream becomes an assistant message."""

    def __init__(
        self,
        api: WireAPI,
        path: str,
        build: Callable[..., dict[str, Any]],
        parse: Callable[[dict[str, Any]], AssistantMessage],
        accumulator: Callable[[], StreamAccumulator],
        *,
        sends_reasoning: bool,
    ) -> None:
        self.api = api
        self.path = path
        self._build = build
        self._parse = parse
        self._accumulator = accumulator
        self._sends_reasoning = sends_reasoning

    def build_request(
        self,
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
        """The request body; every builder applies ``prepare_request_messages`` (here
        first with the context budget, which only this entry point knows)."""
        extra = {"reasoning": reasoning} if self._sends_reasoning else {}
        return self._build(
            prepare_request_messages(messages, context),
            model=model,
            tools=tools,
            options=options,
            output_schema=output_schema,
            stream=stream,
            **extra,
        )

    def parse_response(self, body: dict[str, Any]) -> AssistantMessage:
        """A whole response as one assistant message; one of an unexpected shape becomes
        an ``is_error`` message (a failed turn, retried), never an exception."""
        try:
            return self._parse(body)
        except SHAPE_ERRORS as error:
            reason = f"unexpected response shape ({error!r}): {str(body)[:200]}"
            return finish_message(content="", tool_calls=[], malformed=[], error=reason)

    def new_stream_accumulator(self) -> StreamAccumulator:
        return self._accumulator()


CODECS: dict[str, Codec] = {
    "chat": Codec(
        "chat",
        chat.PATH,
        build_chat_request,
        parse_chat_completion,
        ChatStreamAccumulator,
        sends_reasoning=True,
    ),
    "responses": Codec(
        "responses",
        responses.PATH,
        build_responses_request,
        parse_responses_response,
        ResponsesStreamAccumulator,
        sends_reasoning=False,
    ),
    "anthropic": Codec(
        "anthropic",
        anthropic.PATH,
        build_anthropic_request,
        parse_anthropic_message,
        AnthropicStreamAccumulator,
        sends_reasoning=False,
    ),
}


def codec_for(api: WireAPI) -> Codec:
    """The codec of ``api``; ``ValueError`` for an API it does not know."""
    found = CODECS.get(api)
    if found is None:
        raise ValueError(f"unknown wire API {api!r}: use chat, responses or anthropic")
    return found


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


def request_path(api: WireAPI) -> str:
    """Path appended to the endpoint's base URL (which includes ``/v1``)."""
    return codec_for(api).path


def parse_response(api: WireAPI, body: dict[str, Any]) -> AssistantMessage:
    return codec_for(api).parse_response(body)


def new_stream_accumulator(api: WireAPI) -> StreamAccumulator:
    return codec_for(api).new_stream_accumulator()


def stream_to_message(api: WireAPI, chunks: Sequence[bytes]) -> AssistantMessage:
    """A recorded SSE byte stream (split anywhere) as the assistant message it yields."""
    accumulator = new_stream_accumulator(api)
    for event in parse_sse(chunks):
        accumulator.add(event)
    return accumulator.finish()
