"""What every activity shares while it runs: observation, heartbeats and draining.

Every activity is observed the same way: its log lines carry the session, turn,
attempt and agent (structlog context variables, bound here once), and its latency and
failures go to the worker's metrics (temporalio's metric meter: exported with the SDK's
own metrics, and a no-op when the worker exports none).

Heartbeats come from a timer for as long as an activity runs, and a stopping worker
counts what it had in flight and what became of it (drained or handed over)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar

import structlog
from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from durable_agent._spec.document import ModelPrice
from durable_agent._wire.messages import Usage

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


# Heartbeats on a timer, for as long as an activity runs.
#
# A heartbeat says "this worker is alive", not "the work moved": a model that thinks
# for minutes without a byte, or a tool that blocks in a thread, must not be taken for
# a dead worker. So the beat comes from a timer on the worker's event loop, never from
# the work itself; a worker that dies stops beating, and Temporal retries its activity
# one heartbeat timeout later instead of one start-to-close timeout later.

#: Beats per heartbeat timeout (temporalio throttles what it sends to the server to
#: about 0.8 of the timeout, so a few local beats per timeout lose nothing).
BEATS_PER_TIMEOUT = 4
P = ParamSpec("P")
R = TypeVar("R")


@asynccontextmanager
async def heartbeating(progress: Callable[[], Any] | None = None) -> AsyncIterator[None]:
    """Heartbeat every fraction of the activity's heartbeat timeout until the block
    ends (no-op for an activity scheduled without one). ``progress`` gives the details
    each beat carries (``None``: none), for people reading the pending activity in the
    UI, or for the activity's next attempt (a tool's ``ToolContext.note``)."""
    info = activity.info()
    timeout = info.heartbeat_timeout
    if not timeout:
        yield
        return
    every = max(timeout.total_seconds() / BEATS_PER_TIMEOUT, 0.1)

    async def beat() -> None:
        while True:
            shown = None if progress is None else progress()
            if shown is None:
                activity.heartbeat()
            else:
                activity.heartbeat(shown)
            await asyncio.sleep(every)

    # The first beat half a timeout after the recorded start: a call shorter than that
    # (most of them) sends none, which keeps heartbeats off a busy server, and costs one
    # timer handle, not a task (later beats are throttled by temporalio to 0.8 of the
    # timeout, so the margin before a timeout stays the same). The timer's callback
    # runs in this activity's context, so the task it starts heartbeats for this one.
    beating: list[asyncio.Task[None]] = []
    loop = asyncio.get_running_loop()
    timer = loop.call_later(
        first_beat_after(info.started_time, timeout.total_seconds(), time.time()),
        lambda: beating.append(loop.create_task(beat())),
    )
    try:
        yield
    finally:
        timer.cancel()
        for task in beating:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


def first_beat_after(started: datetime, timeout_seconds: float, now: float) -> float:
    """Seconds from ``now`` (a Unix time) until the first beat: half a timeout after the
    start the server recorded.
    The server counts from that start, which comes before this code runs by however
    long the task took to get here: an activity started eagerly (with the answer to
    the workflow task that scheduled it) on a busy worker can lose a second or more.
    Never later than half a timeout from now, so a worker whose clock runs behind the
    server's beats no later than it would without the start."""
    half = timeout_seconds / 2
    waited = now - started.timestamp()
    return min(half, max(0.0, half - waited))


def heartbeats(activity_fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """An async activity that heartbeats on a timer for as long as it runs (put it
    under ``@activity.defn``)."""

    @functools.wraps(activity_fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        async with heartbeating():
            return await activity_fn(*args, **kwargs)

    return run


# What a stopping worker had in flight, and what became of it.
#
# On SIGTERM a worker stops taking new work and lets the calls it runs finish within its
# drain (temporalio's graceful shutdown timeout): a model call is not sent to the
# provider twice, a tool does not run twice. What is still running when the drain ends
# is cancelled and handed over: Temporal gives it to another worker, once (a tool with an
# effect check is asked first whether its effect exists). This counts both, so the
# worker can say what it drained and what it handed over.

@dataclass
class CallsInFlight(Interceptor):
    running: dict[str, str] = field(default_factory=dict)
    """The calls running now, by activity id: their activity type."""
    finished_while_stopping: int = 0
    """Calls that ended on this worker after it began to stop."""
    handed_over: int = 0
    """Calls its stop cancelled: another worker runs them."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Counted(next, self)

    def kinds(self) -> str:
        """The running calls as a line shows them: ``run_tool x2, call_model``."""
        counts: dict[str, int] = {}
        for kind in self.running.values():
            counts[kind] = counts.get(kind, 0) + 1
        return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(counts.items()))


class _Counted(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, calls: CallsInFlight) -> None:
        super().__init__(next)
        self._calls = calls

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        key = f"{info.workflow_id}/{info.activity_id}/{info.attempt}"
        self._calls.running[key] = info.activity_type
        try:
            result = await self.next.execute_activity(input)
        except asyncio.CancelledError:
            if activity.is_worker_shutdown():
                self._calls.handed_over += 1
            raise
        except BaseException:
            self._ended()
            raise
        finally:
            del self._calls.running[key]
        self._ended()
        return result

    def _ended(self) -> None:
        if activity.is_worker_shutdown():
            self._calls.finished_while_stopping += 1
