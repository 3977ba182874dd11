"""Turning tracing on for a process: an OpenTelemetry SDK exporting over OTLP/HTTP, and
temporalio's ``TracingInterceptor`` on the client (workers built on it inherit it), so
a session's spans link the client's start, the workflow and each activity, and the
model and tool spans (``gen_ai_spans.py``) sit under their activity.

Export never slows a session: spans queue in memory (bounded) and go in batches from a
background thread with a short timeout; when the collector is away or slow, the queue
fills and further spans are dropped, not waited for. Replay emits no spans again (the
interceptor makes workflow spans only when not replaying).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from temporalio.common import MetricMeter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

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
