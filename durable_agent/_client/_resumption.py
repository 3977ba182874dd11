"""Going on with a conversation whose session has ended.

A session ends (``end``, an idle timeout, a spent budget, a failure), but its
conversation need not: a new run under the same id picks the array up. The caller only
names the ended run; the worker reads its messages back from that run itself (never
from the caller's input) and hands them to the new run by reference, as continue-as-new
does. What the caller supplies here is where the old run stopped counting: its message
count and its live events' offset, so readers' cursors go on.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._contracts._contracts import AgentResult, SessionStatus
from durable_agent._errors import DurableAgentError
from durable_agent._spec._spec import Resumption

from ._live_reader import OFFSET_QUERY


@dataclass(frozen=True)
class EndedRun:
    """The newest run of a session, which has ended."""

    resume: Resumption
    owner: str | None
    """Whom the ended run belonged to (memo ``owner``): the new run keeps it."""


class StillRunning(DurableAgentError):
    """The session's newest run has not ended (there is nothing to resume)."""


async def ended_run(client: Client, session_id: str) -> EndedRun | None:
    """The session's ended newest run, or ``None`` when no run of it exists."""
    handle = client.get_workflow_handle(session_id, result_type=AgentResult)
    try:
        described = await handle.describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.status in (None, WorkflowExecutionStatus.RUNNING):
        raise StillRunning(session_id)
    owner: str = await described.memo_value("owner", "", type_hint=str)
    run = client.get_workflow_handle(session_id, run_id=described.run_id, result_type=AgentResult)
    count = offset = None
    try:
        result = await run.result(follow_runs=False)
        count, offset = result.message_count, result.events_offset
    except WorkflowFailureError:  # failed, terminated, timed out: no result to read
        pass
    if count is None:  # the run can still say, replayed by a worker
        status = await run.query("status", result_type=SessionStatus)
        count = status.message_count
    if offset is None:  # ended before results carried it
        offset = await run.query(OFFSET_QUERY, result_type=int)
    resume = Resumption(run_id=described.run_id, message_count=count, events_offset=offset)
    return EndedRun(resume=resume, owner=owner or None)
