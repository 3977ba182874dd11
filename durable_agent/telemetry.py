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

import os
from typing import Any

from opentelemetry import trace

#: Where spans go (``http://host:4318``); the standard OpenTelemetry variable.
ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
#: Spans held while the collector is away or slow; more are dropped.
MAX_QUEUED_SPANS = 4096
EXPORT_TIMEOUT_SECONDS = 2.0

_configured: Any = None


def configure_tracing(endpoint: str | None, service: str) -> bool:
    """Export this process's spans to ``endpoint`` (once per process); whether tracing
    is on. Needs the ``otel`` extra."""
    global _configured
    if not endpoint:
        return _configured is not None
    if _configured is not None:
        return True
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as error:
        raise RuntimeError(
            f"tracing needs its extra: pip install 'durable-agent[otel]' ({error})"
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(
        endpoint=endpoint.rstrip("/") + "/v1/traces", timeout=EXPORT_TIMEOUT_SECONDS
    )
    provider.add_span_processor(
        BatchSpanProcessor(
            exporter,
            max_queue_size=MAX_QUEUED_SPANS,
            schedule_delay_millis=500,
            export_timeout_millis=int(EXPORT_TIMEOUT_SECONDS * 1000),
        )
    )
    trace.set_tracer_provider(provider)
    _configured = provider
    return True


def tracing_from_environment(service: str) -> bool:
    return configure_tracing(os.environ.get(ENDPOINT_ENV), service)


def flush_spans(timeout_seconds: float = 5.0) -> None:
    """Send what is queued (before a process exits)."""
    if _configured is not None:
        _configured.force_flush(int(timeout_seconds * 1000))


def client_interceptors() -> list[Any]:
    """temporalio's tracing interceptor when this process traces, else none."""
    if _configured is None:
        return []
    from temporalio.contrib.opentelemetry import TracingInterceptor

    return [TracingInterceptor()]
