"""Seeing inside a running worker: traces and metrics, the GenAI spans of model and tool
calls, structured logs, and a session's timeline read back from its history."""

from ._gen_ai_spans import (
    embeddings_span,
    image_span,
    model_call_span,
    record_embeddings,
    record_failure,
    record_reply,
    record_tool_result,
    tool_span,
)
from ._logs import configure_logging
from ._telemetry import WorkerMetrics, client_interceptors, configure_tracing, flush_spans
from ._timeline import Span, Timeline, timeline_from_history

__all__ = [
    "Span",
    "Timeline",
    "WorkerMetrics",
    "client_interceptors",
    "configure_logging",
    "configure_tracing",
    "embeddings_span",
    "flush_spans",
    "image_span",
    "model_call_span",
    "record_embeddings",
    "record_failure",
    "record_reply",
    "record_tool_result",
    "timeline_from_history",
    "tool_span",
]
