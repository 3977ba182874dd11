"""Waiting for people's decisions: durable, until all are in, their deadlines pass (the
tool's default decision applies, one page per workflow task), or the loop must act first."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._session import PAGE_BREAK, Session


async def wait_for_decisions(
    session: Session, ids: list[str], interrupted: Callable[[], bool]
) -> None:
    """Wait until every id is decided, deadlines pass (durable timers), or
    ``interrupted()`` says the loop must act first (end of session, continue-as-new)."""
    while not session.all_decided(ids) and not interrupted():
        deadline = session.next_deadline(ids)
        timeout = None
        if deadline is not None:
            timeout = deadline - workflow.now()
            if timeout <= timedelta(0):
                await _defaults_applied(session, ids)
                continue
        try:
            await workflow.wait_condition(
                lambda: session.all_decided(ids) or interrupted(), timeout=timeout
            )
        except TimeoutError:
            await _defaults_applied(session, ids)


async def _defaults_applied(session: Session, ids: list[str]) -> None:
    """A page of the calls past their deadline decided; the next (thousands may pass at
    once) in a task of its own."""
    if session.deadlines_passed(ids, workflow.now()):
        await workflow.sleep(PAGE_BREAK)
