"""GenAI spans (the OpenTelemetry semantic conventions for generative AI): an ``execute``
span per model call, and an ``execute_tool`` span per tool execution.

Only the OpenTelemetry API is used here: without a configured SDK (``telemetry.py``)
the spans are no-ops. Message content goes on a span only when
``DURABLE_AGENT_OTEL_CONTENT=true`` (off by default: prompts and results are data).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from durable_agent._contracts._contracts import ModelSetup
from durable_agent._wire._messages import AssistantMessage, ToolMessage
from durable_agent._wire.codecs import Codec

CONTENT_ENV = "DURABLE_AGENT_OTEL_CONTENT"
tracer = trace.get_tracer("durable_agent")

#: ModelOptions fields by their GenAI attribute names.
_OPTION_NAMES = {
    "temperature": "gen_ai.request.temperature",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "stop": "gen_ai.request.stop_sequences",
    "seed": "gen_ai.request.seed",
}


def content_on_spans() -> bool:
    return os.environ.get(CONTENT_ENV, "").lower() in ("1", "true", "yes")


def request_attributes(setup: ModelSetup, codec: Codec) -> dict[str, Any]:
    """What the call asked for (in ``codec``'s API): the operation, provider, model and
    every option."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": codec.operation,
        "gen_ai.provider.name": codec.provider_name,
        "gen_ai.request.model": setup.model,
    }
    if codec.output_type != "text":
        attributes["gen_ai.output.type"] = codec.output_type
    options = setup.options
    for field, name in _OPTION_NAMES.items():
        value = getattr(options, field)
        if value is not None:
            attributes[name] = value
    choice = options.tool_choice
    if choice is not None:
        attributes["gen_ai.request.tool_choice"] = (
            choice if isinstance(choice, str) else choice.model_dump_json()
        )
    for key, value in options.extra.items():
        attributes[f"gen_ai.request.{key}"] = (
            value if isinstance(value, str | bool | int | float) else json.dumps(value)
        )
    return attributes


@contextmanager
def model_call_span(setup: ModelSetup, codec: Codec, messages: list[Any]) -> Iterator[Span]:
    with tracer.start_as_current_span(
        "execute", kind=SpanKind.CLIENT, attributes=request_attributes(setup, codec)
    ) as span:
        if content_on_spans():
            span.set_attribute("gen_ai.input.messages", json.dumps(messages, default=str))
        yield span


def record_reply(span: Span, message: AssistantMessage, response_id: str | None) -> None:
    """What came back: usage, why it finished, the provider's id for it."""
    if message.usage is not None:
        span.set_attribute("gen_ai.usage.input_tokens", message.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", message.usage.completion_tokens)
    if message.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", [message.finish_reason])
    if response_id:
        span.set_attribute("gen_ai.response.id", response_id)
    if content_on_spans():
        span.set_attribute(
            "gen_ai.output.messages", message.model_dump_json(include={"content", "tool_calls"})
        )


def record_failure(span: Span, kind: str, text: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, text))


@contextmanager
def embeddings_span(model: str, inputs: int) -> Iterator[Span]:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.embeddings.input_count": inputs,
    }
    with tracer.start_as_current_span(
        f"embeddings {model}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


def record_embeddings(span: Span, body: dict[str, Any]) -> None:
    usage = body.get("usage") or {}
    if isinstance(usage.get("prompt_tokens"), int):
        span.set_attribute("gen_ai.usage.input_tokens", usage["prompt_tokens"])
    data = body.get("data") or []
    if data and isinstance(data[0], dict) and isinstance(data[0].get("embedding"), list):
        span.set_attribute("gen_ai.embeddings.dimension.count", len(data[0]["embedding"]))


@contextmanager
def image_span(model: str) -> Iterator[Span]:
    """An image generation a tool asked for (``generate_image``)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "generate_content",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.output.type": "image",
    }
    with tracer.start_as_current_span(
        f"generate_content {model}", kind=SpanKind.CLIENT, attributes=attributes
    ) as span:
        yield span


@contextmanager
def tool_span(name: str, call_id: str, arguments: str) -> Iterator[Span]:
    with tracer.start_as_current_span(
        f"execute_tool {name}",
        kind=SpanKind.INTERNAL,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
        },
    ) as span:
        if content_on_spans():
            span.set_attribute("gen_ai.tool.call.arguments", arguments)
        yield span


def record_tool_result(span: Span, result: ToolMessage) -> None:
    if result.is_error:
        record_failure(span, "tool_error", "the call came back as an error result")
    if content_on_spans():
        content = result.content if isinstance(result.content, str) else str(result.content)
        span.set_attribute("gen_ai.tool.call.result", content)
