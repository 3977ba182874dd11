"""Reading an ended run's conversation back, for a new run of the same session.

The new run names the ended run (``AgentInput.resume``). This activity asks that run for
its messages (a query: a worker replays the closed run), puts them in the transcript
store and returns only their reference. The new run then reads them in pages, as a run
after continue-as-new does: the array never travels in a caller's input, and only a run
of the calling session (the same workflow id) can be named.
"""

from __future__ import annotations

import structlog
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.activities.heartbeat import heartbeats
from durable_agent.activities.transcript_store import TranscriptStore
from durable_agent.contracts import NO_CONVERSATION, ClosedRunInput, TranscriptRef
from durable_agent.messages import Message
from durable_agent.transcript import EMPTY_HASH

log = structlog.get_logger("durable_agent.resumption")

#: Messages one query asks the ended run for (its handler also caps a page by size).
PAGE_MESSAGES = 1000


def _refused(text: str) -> ApplicationError:
    return ApplicationError(text, type=NO_CONVERSATION, non_retryable=True)


class ResumptionActivities:
    def __init__(self, transcripts: TranscriptStore) -> None:
        self.transcripts = transcripts

    @activity.defn(name="closed_conversation")
    @heartbeats
    async def closed_conversation(self, request: ClosedRunInput) -> TranscriptRef:
        """The ended run's whole array, stored, by reference."""
        info = activity.info()
        if info.workflow_id is None or request.run_id == info.workflow_run_id:
            raise _refused("resume: only a session's new run goes on from its ended one")
        handle = activity.client().get_workflow_handle(info.workflow_id, run_id=request.run_id)
        try:
            described = await handle.describe()
        except RPCError as error:
            if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                raise _refused(f"resume: this session has no run {request.run_id!r}") from None
            raise
        if described.status in (None, WorkflowExecutionStatus.RUNNING):
            raise _refused(f"resume: run {request.run_id!r} has not ended")
        messages: list[Message] = []
        try:
            while True:
                page: list[Message] = await handle.query(
                    "messages", args=[len(messages), PAGE_MESSAGES], result_type=list[Message]
                )
                if not page:
                    break
                messages.extend(page)
        except WorkflowQueryFailedError as error:  # its history no longer replays here
            raise _refused(f"resume: run {request.run_id!r} cannot be read: {error}") from None
        head, _ = await self.transcripts.extend(EMPTY_HASH, (), messages)
        log.info("ended run read back", run_id=request.run_id, messages=len(messages))
        return TranscriptRef(count=len(messages), hash=head)
