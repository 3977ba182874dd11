"""Heartbeats on a timer, for as long as an activity runs.

A heartbeat says "this worker is alive", not "the work moved": a model that thinks
for minutes without a byte, or a tool that blocks in a thread, must not be taken for
a dead worker. So the beat comes from a timer on the worker's event loop, never from
the work itself; a worker that dies stops beating, and Temporal retries its activity
one heartbeat timeout later instead of one start-to-close timeout later.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from temporalio import activity

#: Beats per heartbeat timeout (temporalio throttles what it sends to the server to
#: about 0.8 of the timeout, so a few local beats per timeout lose nothing).
BEATS_PER_TIMEOUT = 4
P = ParamSpec("P")
R = TypeVar("R")


@asynccontextmanager
async def heartbeating(progress: Callable[[], Any] | None = None) -> AsyncIterator[None]:
    """Heartbeat every fraction of the activity's heartbeat timeout until the block
    ends (no-op for an activity scheduled without one). ``progress`` gives the details
    each beat carries, for people reading the pending activity in the UI."""
    info = activity.info()
    timeout = info.heartbeat_timeout
    if not timeout:
        yield
        return
    every = max(timeout.total_seconds() / BEATS_PER_TIMEOUT, 0.1)

    async def beat() -> None:
        while True:
            if progress is None:
                activity.heartbeat()
            else:
                activity.heartbeat(progress())
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
