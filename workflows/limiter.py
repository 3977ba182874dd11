"""One endpoint's limiter: a long-lived workflow that every worker's model calls ask for
capacity (the ``acquire`` update) and give it back to (the ``release`` signal).

Why a workflow: the limit must hold across every worker process and session on the
namespace, and Temporal is the one shared, durable thing they all reach; there is no
new server to run. The server's own task-queue rate limit was the other choice, but
it counts activity starts per second only, not tokens or concurrency, does not share
fairly between tenants, and a call it holds back waits without a trace in ``status``.

A call under the limit pays one update round trip. A call over it is told to wait:
its session waits durably (``status`` shows it) until this workflow signals
``capacity_ready``, when capacity is kept for it. The book itself is the pure ``Ledger``.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

AUTO_UPGRADE = workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.capacity import Ledger, LedgerState, Waiter
    from durable_agent._spec.endpoints import (
        CAPACITY_READY_SIGNAL,
        LIMITER_WORKFLOW,
        CapacityAnswer,
        CapacityReady,
        CapacityRelease,
        CapacityRequest,
        limiter_id,
    )

    from .patches import LIMITER_MOVES_PATCH, retired

#: History events, and updates (the server takes 2,000 a run), a limiter's run holds
#: before it goes on as a new run.
EVENTS_PER_RUN = 5_000
UPDATES_PER_RUN = 1_000


@workflow.defn(name=LIMITER_WORKFLOW, sandboxed=False)  # see durable_agent.temporal._plugin
class EndpointLimiter:
    @workflow.init
    def __init__(self, key: str, state: LedgerState) -> None:
        self._key = key
        self._bound = bool(state.lease_prefix)
        """Started by a worker of this release: its id names its limits and it keeps
        those alone (a limiter of an earlier release took each ask's)."""
        info = workflow.info()
        self._forged = "@" in info.workflow_id and not self._as_its_id_says(key, state, info)
        """Started by someone else, with other limits than its id names, or with a book
        already written (leases held, a pause): it serves nobody. Read before any ask
        is taken (an update-with-start's ask runs before ``run``)."""
        self._ledger = Ledger(state)
        self._changed = False
        self._telling: set[asyncio.Task[None]] = set()
        self._updates = 0

    @workflow.run
    async def run(self, key: str, state: LedgerState) -> None:
        if self._forged:
            raise ApplicationError(
                "this limiter did not start as its id says: the limits it names, and an "
                "empty book",
                non_retryable=True,
            )
        while True:
            now = _now()
            for waiter in self._ledger.serve(now):
                task = asyncio.ensure_future(self._tell(waiter))
                self._telling.add(task)
                task.add_done_callback(self._telling.discard)
            moving = self._build_changed()
            if (moving or self._history_long()) and not self._telling:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    args=[self._key, self._ledger.state],
                    initial_versioning_behavior=AUTO_UPGRADE if moving else None,
                )
            wake = self._ledger.next_change(now)
            self._changed = False
            timeout = None if wake is None else timedelta(seconds=max(wake - now, 0.001))
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: self._changed, timeout=timeout)

    async def _tell(self, waiter: Waiter) -> None:
        """Signal the waiting session; one that ended gives its kept capacity back."""
        handle = workflow.get_external_workflow_handle(waiter.session_id, run_id=waiter.run_id)
        try:
            await handle.signal(CAPACITY_READY_SIGNAL, CapacityReady(key=self._key))
        except Exception:  # the session is gone: nobody claims the capacity
            self._ledger.forget(waiter.session_id)
        self._changed = True

    @workflow.update(name="acquire")
    def acquire(self, requests: list[CapacityRequest]) -> list[CapacityAnswer]:
        """A worker's asks, together (one update per worker at a time: the server takes
        only a few at once per workflow)."""
        self._updates += 1
        self._changed = True
        return [self._ledger.acquire(_now(), request) for request in requests]

    @acquire.validator
    def _limits_named(self, requests: list[CapacityRequest]) -> None:
        if self._forged:
            raise ValueError("this limiter did not start as its id says: it serves nobody")
        if self._bound and any(r.limits != self._ledger.state.limits for r in requests):
            raise ValueError("an ask's limits are not the ones this limiter's id names")

    @workflow.signal(name="release")
    def release(self, releases: list[CapacityRelease]) -> None:
        self._changed = True
        for release in releases:
            self._ledger.release(_now(), release)

    @workflow.query(name="ledger")
    def ledger(self) -> dict[str, Any]:
        return self._ledger.view(_now())

    def _as_its_id_says(self, key: str, state: LedgerState, info: workflow.Info) -> bool:
        """Whether the limits are those its id names, and a first run's book is empty (a
        run continued as new carries its own)."""
        if not self._bound or info.workflow_id != limiter_id(key, state.limits):
            return False
        empty = LedgerState(limits=state.limits, lease_prefix=state.lease_prefix)
        return info.continued_run_id is not None or state == empty

    def _build_changed(self) -> bool:
        """Another build was made current: every session's calls will ask there."""
        changed = workflow.info().is_target_worker_deployment_version_changed()
        if changed:
            retired(LIMITER_MOVES_PATCH)  # the previous release's limiters asked it here
        return changed

    def _history_long(self) -> bool:
        info = workflow.info()
        long = info.get_current_history_length() >= EVENTS_PER_RUN
        return long or self._updates >= UPDATES_PER_RUN or info.is_continue_as_new_suggested()


def _now() -> float:
    return workflow.now().timestamp()
