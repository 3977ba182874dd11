"""What a stopping worker had in flight, and what became of it.

On SIGTERM a worker stops taking new work and lets the calls it runs finish within its
drain (temporalio's graceful shutdown timeout): a model call is not sent to the
provider twice, a tool does not run twice. What is still running when the drain ends
is cancelled and handed over: Temporal gives it to another worker, once (a tool with an
effect check is asked first whether its effect exists). This counts both, so the
worker can say what it drained and what it handed over."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor


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
