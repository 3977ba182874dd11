"""Waiting for people's decisions, durably: the Session says when the wait is over (all
decided, or the loop must act first); the workflow times it, and tells the Session when
a deadline passed (the tool's default decision applies, one page per workflow task).

Also carrying out the gate's activities (predicates, descriptions of waiting calls,
token checks, escalations), and a sub-agent session telling its parent which of its
approvals wait."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.approvals import (
        ApprovalCheckInput,
        ChildApprovals,
        DescribeCallsInput,
        TokenVerdict,
    )
    from durable_agent._session import (
        PAGE_BREAK,
        CheckApprovals,
        DescribeCalls,
        NotifyEscalation,
        Session,
        VerifyTokens,
    )
    from durable_agent._session.protocol import DeadlinesPassed
    from durable_agent._spec.document import SessionRules

    from .retries import LOST_WORK_RETRIES


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


# Carrying out the gate's activities: predicates, descriptions of waiting calls,
# signed decisions checked by the workers, and escalations told to a second group.

async def _run(name: str, arg: Any, result_type: Any, rules: SessionRules, summary: str) -> Any:
    return await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=timedelta(seconds=30),
        heartbeat_timeout=timedelta(seconds=rules.heartbeat_timeout_seconds),
        retry_policy=LOST_WORK_RETRIES,
        summary=summary,
    )


async def check_approvals(command: CheckApprovals, rules: SessionRules) -> list[bool]:
    """The predicates' answers (the tools' own, or the rules' named ones)."""
    pairs = [(c.function.name, c.function.arguments) for c in command.calls]
    request = ApprovalCheckInput(calls=pairs, predicates=command.predicates)
    summary = f"check_approvals {len(pairs)} calls"
    verdicts: list[bool] = await _run("check_approvals", request, list[bool], rules, summary)
    return verdicts


async def describe_calls(command: DescribeCalls, rules: SessionRules) -> list[str]:
    pairs = [(c.function.name, c.function.arguments) for c in command.calls]
    summary = f"describe_calls {len(pairs)} calls"
    request = DescribeCallsInput(calls=pairs)
    described: list[str] = await _run("describe_calls", request, list[str], rules, summary)
    return described


async def verify_tokens(command: VerifyTokens, rules: SessionRules) -> list[TokenVerdict]:
    summary = f"verify_approver_tokens {', '.join(c.subject for c in command.checks)}"
    name, kind = "verify_approver_tokens", list[TokenVerdict]
    verdicts: list[TokenVerdict] = await _run(name, command.checks, kind, rules, summary)
    return verdicts


async def notify_escalation(command: NotifyEscalation, rules: SessionRules) -> None:
    notice = command.notice
    ids = ", ".join(p.approval_id for p in notice.approvals)
    summary = f"notify_escalation {ids} to {', '.join(notice.notify)}"
    await _run("notify_escalation", notice, None, rules, summary)


# A sub-agent session tells its parent which of its approvals wait, so the parent's
# people can decide them. A child whose batch of thousands waits reports one page per signal:
# each signal is awaited, so no task encodes more than a page of them.

async def report_to_parent(session: Session) -> None:
    """The undecided approvals, one page per signal (none: an empty report, which takes the
    child's entries away)."""
    parent = workflow.info().parent
    if parent is None:
        return
    child_id = workflow.info().workflow_id
    handle = workflow.get_external_workflow_handle(parent.workflow_id)
    undecided = session.view.approvals.undecided()
    size = session.view.approvals.page_for(len(undecided))
    start = 0
    while True:
        page = undecided[start : start + size]
        report = ChildApprovals(child_id=child_id, pending=page, continued=start > 0)
        await handle.signal("child_approvals", report)
        start += size
        if start >= len(undecided):
            return
