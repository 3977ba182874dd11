"""Tracing: turning it on for a process, and the spans durable-agent makes.

``configure_tracing`` sets up an OpenTelemetry SDK exporting over OTLP/HTTP, and
temporalio's ``TracingInterceptor`` goes on the client (workers built on it inherit it),
so a session's spans link the client's start, the workflow and each activity. The GenAI
spans (below: an ``execute`` span per model call, an ``execute_tool`` span per tool
execution) sit under their activity.

Export never slows a session: spans queue in memory (bounded) and go in batches from a
background thread with a short timeout; when the collector is away or slow, the queue
fills and further spans are dropped, not waited for. Replay emits no spans again (the
interceptor makes workflow spans only when not replaying).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from temporalio.common import MetricMeter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from durable_agent._contracts.boundary import ModelSetup
from durable_agent._wire.codecs import Codec
from durable_agent._wire.messages import AssistantMessage, Message, ToolMessage, dump_messages

#: Spans held while the collector is away or slow; more are dropped.
MAX_QUEUED_SPANS = 4096
EXPORT_TIMEOUT_SECONDS = 2.0

_configured: Any = None


def configure_tracing(endpoint: str | None, service: str, meter: MetricMeter | None = None) -> bool:
    """Export this process's spans to ``endpoint`` (once per process); whether tracing
    is on. With a ``meter``, spans that could not be delivered are counted there. Needs
    the ``otel`` extra."""
    global _configured
    if not endpoint:
        return _configured is not None
    if _configured is not None:
        return True
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError as error:
        raise RuntimeError(
            f"tracing needs its extra: pip install 'durable-agent[otel]' ({error})"
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(
        endpoint=endpoint.rstrip("/") + "/v1/traces", timeout=EXPORT_TIMEOUT_SECONDS
    )
    batches = bounded_batches(exporter, meter, MAX_QUEUED_SPANS)
    provider.add_span_processor(batches)
    trace.set_tracer_provider(provider)
    _configured = provider
    return True


def bounded_batches(exporter: Any, meter: MetricMeter | None, capacity: int) -> Any:
    """A batch processor that never blocks the code that ends a span: at most
    ``capacity`` spans wait, exported in batches from a background thread, each export
    given ``EXPORT_TIMEOUT_SECONDS``; with a ``meter``, what it drops is counted."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    counting = CountingSpanExporter(exporter, meter, capacity) if meter is not None else None
    sink: Any = counting or exporter
    batches = BatchSpanProcessor(
        sink,
        max_queue_size=capacity,
        max_export_batch_size=min(512, capacity),
        schedule_delay_millis=500,
        export_timeout_millis=int(EXPORT_TIMEOUT_SECONDS * 1000),
    )
    if counting is not None:
        on_end = batches.on_end

        def counted_on_end(span: Any) -> None:
            counting.span_ended()
            on_end(span)

        batches.on_end = counted_on_end  # type: ignore[method-assign]
    return batches


def flush_spans(timeout_seconds: float = 5.0) -> None:
    """Send what is queued (before a process exits)."""
    if _configured is not None:
        _configured.force_flush(int(timeout_seconds * 1000))


@dataclass
class WorkerMetrics:
    """A worker's Prometheus endpoint (``/metrics``), served by the Temporal SDK's core:
    its own metrics, ours (recorded through temporalio's metric meter, in activities and
    replay-safely in workflows) and the span exporter's losses."""

    runtime: Runtime

    @classmethod
    def serve(cls, address: str) -> WorkerMetrics:
        """Serve on ``host:port``."""
        prometheus = PrometheusConfig(bind_address=address)
        return cls(Runtime(telemetry=TelemetryConfig(metrics=prometheus)))


class CountingSpanExporter:
    """An exporter that counts what it could not deliver (``durable_agent_spans_dropped``
    by reason): exports that failed, and spans that found the queue full (more spans
    waiting than it holds: the batch processor drops one each time)."""

    def __init__(self, exporter: Any, meter: MetricMeter, capacity: int) -> None:
        self._exporter = exporter
        self._capacity = capacity
        self._waiting = 0
        self._lock = threading.Lock()
        self.dropped = meter.create_counter(
            "durable_agent_spans_dropped", "spans not delivered to the collector, by reason"
        )

    def span_ended(self) -> None:
        with self._lock:
            if self._waiting >= self._capacity:
                self.dropped.add(1, {"reason": "queue_full"})
                return
            self._waiting += 1

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        with self._lock:  # taken from the queue: capacity for as many more
            self._waiting = max(0, self._waiting - len(spans))
        try:
            result = self._exporter.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        if result != SpanExportResult.SUCCESS:
            self.dropped.add(len(spans), {"reason": "export_failed"})
        return result

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))


def client_interceptors() -> list[Any]:
    """temporalio's tracing interceptor when this process traces, else none."""
    if _configured is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor()]


# GenAI spans (the OpenTelemetry semantic conventions for generative AI): an ``execute``
# span per model call, and an ``execute_tool`` span per tool execution.
#
# Only the OpenTelemetry API is used here: without a configured SDK (``configure_tracing``)
# the spans are no-ops. Message content goes on a span only when
# ``DURABLE_AGENT_OTEL_CONTENT=true`` (off by default: prompts and results are data).

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
def model_call_span(setup: ModelSetup, codec: Codec, messages: Sequence[Message]) -> Iterator[Span]:
    with tracer.start_as_current_span(
        "execute", kind=SpanKind.CLIENT, attributes=request_attributes(setup, codec)
    ) as span:
        if content_on_spans():  # the array is encoded only to be put on the span
            content = json.dumps(dump_messages(messages), default=str)
            span.set_attribute("gen_ai.input.messages", content)
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
