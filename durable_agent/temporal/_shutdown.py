"""How a durable-agent process stops: on a signal it unwinds what it started; when it
is done it exits without interpreter teardown."""

from __future__ import annotations

import asyncio
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
