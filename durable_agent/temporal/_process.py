"""How a durable-agent process stops and keeps its pauses short: on a signal it unwinds
what it started; when it is done it exits without interpreter teardown; and a worker
keeps the garbage collector's passes short and rare (``freeze_startup_heap``)."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn

from durable_agent._errors import DurableAgentError


class Stopped(DurableAgentError):
    """The process was asked to stop (SIGTERM or SIGINT) and has unwound."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.exit_status = 128 + signum


async def stoppable(command: Coroutine[Any, Any, int]) -> int:
    """Run ``command`` so that SIGTERM or SIGINT unwinds it: what it started (the
    embedded Temporal server, workers) is stopped by its own ``finally`` blocks instead
    of outliving the process. Both are handled here, not left to Python's defaults:
    a service manager stops with SIGTERM, and a process started in the background
    of a script inherits SIGINT ignored."""
    main = asyncio.current_task()
    assert main is not None
    received: list[int] = []

    def stop(signum: int) -> None:
        received.append(signum)
        main.cancel()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await command
    except asyncio.CancelledError:
        if received:
            raise Stopped(received[0]) from None
        raise


def exit_without_teardown(code: int) -> NoReturn:
    """Exit once all output is flushed, skipping interpreter finalization: temporalio's
    Rust runtime threads can abort a finalizing interpreter (SIGABRT,
    "PyGILState_Release", temporalio/sdk-python#300) after the work is done."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# Keeping the garbage collector's passes short and rare in a worker process.
#
# CPython's full collection walks every object that can hold references, in whichever
# thread allocates when it comes due: in a worker, often a workflow task, whose time the
# SDK's deadlock detector counts (2 s). A started worker holds about 100,000 such objects
# that live as long as the process (modules, pydantic's and temporalio's schemas): every
# full pass walked them again, 40 ms of a pass that took 120 to 150 ms in
# ``./run bench-activations``. Frozen once the worker is built, they are left out of
# every later pass. (What sessions hold is not frozen: it is freed when they go.)
#
# A worker also allocates fast (every payload, event and message is a pydantic model
# with a dict and a set of its own), so CPython's default thresholds, a young pass every
# 700 allocations, ran about 250 passes in one round of ``./run bench``'s workload C (50
# sessions at once), the older generations' among them: 0.4 to 0.55 s of the worker's 13 s
# of CPU. Young passes every 10,000 allocations (most of what they look at is dead by
# then) took 0.1 to 0.2 s of it.

#: ``gc.set_threshold`` for a worker: young passes every 10,000 net allocations of
#: objects that can hold references (CPython's default is 700); older generations as
#: by default, every 10 passes of the one below.
WORKER_GC_THRESHOLDS = (10_000, 10, 10)


def freeze_startup_heap() -> int:
    """Collect once, then leave every object alive now out of later collections, and
    collect the young generation less often; call it after imports, tool modules and
    tokenizers are loaded, before the worker polls. Returns how many objects were
    frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*WORKER_GC_THRESHOLDS)
    return gc.get_freeze_count()
