"""Every activity, observed the same way: its log lines carry the session, turn,
attempt and agent (structlog context variables, bound here once), and its latency and
failures go to the worker's metrics (temporalio's metric meter: exported with the SDK's
own metrics, and a no-op when the worker exports none)."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import structlog
from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from durable_agent._spec._spec import ModelPrice
from durable_agent._wire._messages import Usage

from .transcript_store import transcript_scope


class ObservingInterceptor(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ObservedActivity(next)


class _ObservedActivity(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        call = input.args[0] if input.args else None
        context = {
            "session_id": info.workflow_id,
            "activity": info.activity_type,
            "attempt": info.attempt,
            "turn": getattr(call, "turn", None),
            "agent": getattr(call, "agent_name", None),
        }
        meter = activity.metric_meter()
        labels = {"activity": info.activity_type}
        start = time.monotonic()
        outcome = "ok"
        # the transcripts this activity may touch are its own session's
        scope = transcript_scope.set(f"{info.workflow_namespace}/{info.workflow_id}")
        with structlog.contextvars.bound_contextvars(
            **{k: v for k, v in context.items() if v is not None}
        ):
            try:
                return await self.next.execute_activity(input)
            except BaseException:
                outcome = "error"
                raise
            finally:
                transcript_scope.reset(scope)
                meter.create_histogram_timedelta(
                    "durable_agent_activity_latency", "activity duration by type", "ms"
                ).record(
                    timedelta(seconds=time.monotonic() - start), {**labels, "outcome": outcome}
                )


def count_tokens(model: str, usage: Usage | None, price: ModelPrice | None = None) -> None:
    """A model call's tokens, in and out, by model, and their cost by its price."""
    if usage is None:
        return
    meter = activity.metric_meter()
    counter = meter.create_counter(
        "durable_agent_model_tokens", "tokens of model calls, by direction and model"
    )
    counter.add(usage.prompt_tokens, {"direction": "input", "model": model})
    counter.add(usage.completion_tokens, {"direction": "output", "model": model})
    if usage.cached_tokens or usage.cache_write_tokens:  # of the input, the cache's part
        cache = meter.create_counter(
            "durable_agent_model_cache_tokens",
            "input tokens the provider's prompt cache served (read) or took (write)",
        )
        cache.add(usage.cached_tokens or 0, {"kind": "read", "model": model})
        cache.add(usage.cache_write_tokens or 0, {"kind": "write", "model": model})
    if price is not None:
        cost = meter.create_counter(
            "durable_agent_model_cost_microusd", "cost of model calls by their price (1e-6 USD)"
        )
        cost.add(round(price.cost_usd(usage) * 1_000_000), {"model": model})


def count_tool_call(name: str, error: bool) -> None:
    """A tool execution and whether it failed (an error result or a raise)."""
    activity.metric_meter().create_counter(
        "durable_agent_tool_calls", "tool executions, by tool and whether they failed"
    ).add(1, {"tool": name, "error": str(error).lower()})
