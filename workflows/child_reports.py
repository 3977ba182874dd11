"""A sub-agent session tells its parent which of its approvals wait, so the parent's
people can decide them. A child whose batch of thousands waits reports one page per signal:
each signal is awaited, so no task encodes more than a page of them."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts._approval_contracts import ChildApprovals
    from durable_agent._session import Session


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
