"""Reading a conversation back from another run: an ended run of the same session, for
its new run (``AgentInput.resume``), or the start of another session, for a branch
(``AgentInput.fork``); or from the calling run's own start, a history sent apart from
its input (``AgentInput.earlier``).

The activity asks that run for its messages (a query), puts them in the transcript
store and returns only their reference. The new run then reads them in pages, as a run
after continue-as-new does: the array never travels in a caller's input. A resumption
names only a run of the calling session (the same workflow id); a fork may name any
session, as whoever can start a workflow can read any (the gateway checks its callers
own the session they fork).
"""

from __future__ import annotations

from typing import Any

import structlog
from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowQueryFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._contracts.boundary import (
    EARLIER_HISTORY_SIGNAL,
    ClosedRunInput,
    ForkInput,
    StartedHistoryInput,
    TranscriptRef,
)
from durable_agent._errors import Failure
from durable_agent._wire.messages import Message, explain
from durable_agent._wire.transcript import fork_problem, root_of, with_instructions

from .running import heartbeats
from .transcript_store import TranscriptStore

log = structlog.get_logger("durable_agent.resumption")

#: Messages one query asks the ended run for (its handler also caps a page by size).
PAGE_MESSAGES = 1000


def _refused(text: str) -> ApplicationError:
    return ApplicationError(text, type=Failure.NO_CONVERSATION, non_retryable=True)


def _invalid(text: str) -> ApplicationError:
    return ApplicationError(
        f"invalid session input: {text}", type=Failure.INVALID_INPUT, non_retryable=True
    )


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
        messages = await _read(handle, None, f"resume: run {request.run_id!r}")
        log.info("ended run read back", run_id=request.run_id, messages=len(messages))
        return await self._stored(messages, request.chain)

    @activity.defn(name="forked_conversation")
    @heartbeats
    async def forked_conversation(self, request: ForkInput) -> TranscriptRef:
        """The first ``at`` messages of the session a branch starts from, stored, by
        reference (under the branch's instructions)."""
        fork = request.fork
        if fork.session_id == activity.info().workflow_id:
            raise _refused("fork: a session cannot branch from itself")
        handle = activity.client().get_workflow_handle(fork.session_id, run_id=fork.run_id)
        where = f"fork: session {fork.session_id!r}"
        try:
            messages = await _read(handle, fork.at, where)
        except RPCError as error:
            if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                raise _refused(f"{where} does not exist") from None
            raise
        problem = fork_problem(messages, fork.at)
        if problem is not None:
            raise _refused(problem)
        branch = with_instructions(messages[: fork.at], request.instructions)
        log.info("branch read", parent_session_id=fork.session_id, at=fork.at)
        return await self._stored(branch, request.chain)

    @activity.defn(name="started_conversation")
    @heartbeats
    async def started_conversation(self, request: StartedHistoryInput) -> TranscriptRef:
        """The history the calling run was started with apart from its input, stored
        after ``request.first``, by reference. Read from the run's own history (never
        another run's: the input names none), from the signal sent with the start, and
        checked as the input's history is."""
        info = activity.info()
        client = activity.client()
        handle = client.get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)
        sent = await _sent_with_start(handle)
        if sent is None:
            raise _invalid(f"history: {request.count} messages announced, none sent with the start")
        try:
            [earlier] = await client.data_converter.decode(sent, [list[Message]])
        except Exception as error:  # bad JSON, an unknown role, a bad field
            raise _invalid(f"history: {explain(error)}") from None
        if len(earlier) != request.count:
            raise _invalid(f"history: {len(earlier)} messages sent, {request.count} announced")
        log.info("started history read", messages=len(earlier))
        messages = [request.first, *earlier] if request.first else earlier
        return await self._stored(messages, request.chain)

    async def _stored(self, messages: list[Message], chain: int | None) -> TranscriptRef:
        """The messages stored, by reference in the chain the workflow asked for."""
        head, _ = await self.transcripts.extend(root_of(chain), (), messages)
        return TranscriptRef(count=len(messages), hash=head)


async def _sent_with_start(handle: WorkflowHandle[Any, Any]) -> list[Payload] | None:
    """The argument of the ``EARLIER_HISTORY_SIGNAL`` sent with the start: signal-with-start
    writes it right after the start event, before the run's first task is even scheduled.
    One sent by anyone once the run began comes later (even before its first task
    starts), and is ignored."""
    async for event in handle.fetch_history_events(page_size=2):
        if event.event_id < 2:
            continue
        signaled = event.workflow_execution_signaled_event_attributes
        sent = event.HasField("workflow_execution_signaled_event_attributes")
        if event.event_id == 2 and sent and signaled.signal_name == EARLIER_HISTORY_SIGNAL:
            return list(signaled.input.payloads)
        return None
    return None


async def read_messages(
    handle: WorkflowHandle[Any, Any], until: int | None = None
) -> list[Message]:
    """A run's messages (the first ``until``, or all), by its ``messages`` query, page
    by page (one answer carries at most a page)."""
    messages: list[Message] = []
    while until is None or len(messages) < until:
        limit = PAGE_MESSAGES if until is None else min(PAGE_MESSAGES, until - len(messages))
        page: list[Message] = await handle.query(
            "messages", args=[len(messages), limit], result_type=list[Message]
        )
        if not page:
            break
        messages.extend(page)
    return messages


async def _read(handle: WorkflowHandle[Any, Any], until: int | None, where: str) -> list[Message]:
    try:
        return await read_messages(handle, until)
    except WorkflowQueryFailedError as error:  # its history no longer replays here
        raise _refused(f"{where} cannot be read: {error}") from None
