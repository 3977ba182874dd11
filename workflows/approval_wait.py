"""Waiting for people's decisions, durably: the Session says when the wait is over (all
decided, or the loop must act first); the workflow times it, and tells the Session when
a deadline passed (the tool's default decision applies, one page per workflow task)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._session import PAGE_BREAK, Session
    from durable_agent._session._events import DeadlinesPassed


async def wait_for_decisions(
    session: Session,
    ids: list[str],
    suggested: Callable[[], bool],
    caller_stops: Callable[[], bool] = lambda: False,
) -> None:
    """Wait until the Session says the wait for ``ids`` is over (``suggested()``: a
    continue-as-new is suggested), telling it of each deadline that passes;
    ``caller_stops()``: the caller's own reason to stop waiting (an inline run whose
    approver failed)."""
    view = session.view

    def over() -> bool:
        return caller_stops() or view.approvals_wait_over(ids, suggested())

    while not over():
        deadline = view.approvals.next_deadline(ids)
        timeout = None
        if deadline is not None:
            timeout = deadline - workflow.now()
            if timeout <= timedelta(0):
                await _defaults_applied(session, ids)
                continue
        try:
            await workflow.wait_condition(over, timeout=timeout)
        except TimeoutError:
            await _defaults_applied(session, ids)


async def _defaults_applied(session: Session, ids: list[str]) -> None:
    """A page of the calls past their deadline decided; the next (thousands may pass at
    once) in a task of its own."""
    session.handle(DeadlinesPassed(ids), workflow.now())
    if session.view.approvals.defaults_left:
        await workflow.sleep(PAGE_BREAK)
