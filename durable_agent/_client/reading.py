"""Reading a session through Temporal: queries that wait out a busy worker, waits for a
session's end that notice when no worker is there to reach it, the error that says
which worker is missing, and the session's live event log (``read_live_events``).

A query is answered by the worker that holds the session (or, if none does, by any
worker of the session's task queue), between that session's workflow tasks. "No answer"
has three causes a person fixes differently: no worker ever came for the queue (start
one), the workers stopped (restart them), or they are alive and busy (wait, add workers,
or give queries longer). The server knows who asked the queue for work and when, so the
error says which it is.

A wait for the session's end has no answer to miss: the session may rightly wait for a
person for days. It is stuck only while its next step (a workflow task) waits for a
worker and no worker asks its queue for work, which the server also knows; then the
wait says so within the same bound a query has.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import PendingWorkflowTaskState, TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.converter import PayloadConverter
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._contracts.events import EVENTS_TOPIC, Ended, Gap, LiveEvent, read_event
from durable_agent._errors import DurableAgentError

from .results import LIVE_POLL_SECONDS, NoWorkerError

T = TypeVar("T")

#: Longest one query attempt waits: past the server's 10 s window for a worker that
#: stopped asking for work, so the next attempt reaches the others.
QUERY_ATTEMPT_SECONDS = 12.0
#: How long finding out who serves the queue may add to the error (a busy server answers
#: describe calls late too, and without its answer the error can only ask).
DIAGNOSIS_SECONDS = 10.0


class Unanswered(DurableAgentError):
    """No attempt was answered before the query's time was up."""


async def patient_query(
    handle: WorkflowHandle[Any, Any], name: str, args: list[Any], result_type: Any, seconds: float
) -> Any:
    """Ask in attempts of at most ``QUERY_ATTEMPT_SECONDS`` until ``seconds`` are up. A
    query goes first to the worker that holds the session; one that hangs or died while
    answering never does, and the server sends the next attempt to the other workers once
    the silent one has not asked for work for about 10 s. Temporal's other refusals are
    raised as they are; ``Unanswered`` when time ran out."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        left = deadline - loop.time()
        try:
            return await handle.query(
                name,
                args=args,
                result_type=result_type,
                rpc_timeout=timedelta(seconds=min(left, QUERY_ATTEMPT_SECONDS)),
            )
        except RPCError as error:
            if no_poller(error):  # a closed session: the server asks no worker to wait
                raise Unanswered from None
            if error.status not in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
                raise
            if deadline - loop.time() < 1.0:
                raise Unanswered from None


def no_poller(error: RPCError) -> bool:
    """The server refused a query at once because no worker polls the session's queue
    (what it does for a session that has ended)."""
    return error.status == RPCStatusCode.FAILED_PRECONDITION and "no poller" in error.message


async def no_worker_error(
    temporal: Client, handle: WorkflowHandle[Any, Any], task_queue: str, seconds: float
) -> NoWorkerError:
    """The error for a session no worker answered for, saying who serves its task queue
    (the session's own, which need not be this client's): nobody, workers that stopped,
    or workers alive but busy. Without an answer from the server, the plain question."""
    try:
        timeout = timedelta(seconds=DIAGNOSIS_SECONDS)
        session = await handle.describe(rpc_timeout=timeout)
        queue = session.task_queue or task_queue
        ended = session.status not in (None, WorkflowExecutionStatus.RUNNING)
        request = DescribeTaskQueueRequest(
            namespace=temporal.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
        described = await temporal.workflow_service.describe_task_queue(request, timeout=timeout)
    except RPCError:
        return NoWorkerError(handle.id, task_queue, seconds)
    now = time.time()
    polled = [max(0.0, now - p.last_access_time.ToMicroseconds() / 1e6) for p in described.pollers]
    return NoWorkerError(handle.id, queue, seconds, polled_seconds_ago=polled, ended=ended)


async def served_wait(
    temporal: Client,
    handle: WorkflowHandle[Any, Any],
    task_queue: str,
    seconds: float,
    waiting: Awaitable[T],
) -> T:
    """``waiting`` (the session's end), unless no worker is there to reach it: every
    ``seconds`` the session is asked whether its next step waits for a worker while none
    asks its queue for work, and then the wait stops with ``NoWorkerError``. A session
    that waits for a person, a message or a busy worker is waited on for as long as it
    takes."""
    task = asyncio.ensure_future(waiting)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=seconds)
            if done:
                return task.result()
            missing = await unserved(temporal, handle, task_queue, seconds)
            if missing is not None:
                raise missing
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def unserved(
    temporal: Client, handle: WorkflowHandle[Any, Any], task_queue: str, seconds: float
) -> NoWorkerError | None:
    """The error for a running session whose next step no worker will take (it waits
    for a worker and no live one asks the session's queue); ``None`` while it waits for
    anything else, is taken, or the server does not say."""
    try:
        timeout = timedelta(seconds=DIAGNOSIS_SECONDS)
        described = await handle.describe(rpc_timeout=timeout)
    except RPCError:
        return None  # the wait itself says what is wrong with the session
    if described.status != WorkflowExecutionStatus.RUNNING:
        return None
    raw = described.raw_description
    scheduled = PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED
    if not raw.HasField("pending_workflow_task") or raw.pending_workflow_task.state != scheduled:
        return None  # waiting for a person, a message, a timer, or a worker has it
    found = await no_worker_error(temporal, handle, task_queue, seconds)
    live = [s for s in found.polled_seconds_ago or [] if s <= LIVE_POLL_SECONDS]
    return None if found.polled_seconds_ago is None or live else found


# Reading a session's live event log (``SessionHandle.follow``).
#
# The log is temporalio's contrib workflow stream; it is read here through the stream's
# own poll *query*, not its long-poll update: a query leaves nothing in the session's
# history, so any number of readers (a gateway, many browser tabs) cost the session
# nothing, where each update poll would write its answer into history for good. A
# reader that is caught up asks again after ``poll_seconds``.

#: The stream's poll query and offset query (temporalio.contrib.workflow_streams).
POLL_QUERY = "__temporal_workflow_stream_poll"
OFFSET_QUERY = "__temporal_workflow_stream_offset"
#: Polls without news between two checks that the session still runs.
POLLS_PER_LIVENESS_CHECK = 20
#: Query errors a reader waits out: a run starting (continue-as-new), a worker lost or
#: restarting (its query times out), the server briefly away.
_TRANSIENT = (
    RPCStatusCode.FAILED_PRECONDITION,
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.CANCELLED,
    RPCStatusCode.DEADLINE_EXCEEDED,
)
#: Longest one poll waits for a worker to answer before it is asked again.
POLL_TIMEOUT_SECONDS = 5.0


async def read_live_events(
    handle: WorkflowHandle[Any, Any],
    converter: PayloadConverter,
    *,
    after: int,
    poll_seconds: float,
    closed: Callable[[], Awaitable[Ended | None]],
) -> AsyncIterator[LiveEvent]:
    """Events after offset ``after`` until ``ended`` (or, when the run closed without
    one, e.g. terminated, the ``Ended`` that ``closed()`` makes up)."""
    offset = after + 1
    quiet = 0
    while True:
        try:
            page: PollResult = await handle.query(
                POLL_QUERY,
                PollInput(topics=[EVENTS_TOPIC], from_offset=offset),
                result_type=PollResult,
                rpc_timeout=timedelta(seconds=POLL_TIMEOUT_SECONDS),
            )
        except (WorkflowQueryFailedError, WorkflowQueryRejectedError):
            page = PollResult(next_offset=offset)  # a run between tasks: ask again
        except RPCError as error:
            if error.status not in _TRANSIENT:
                raise
            page = PollResult(next_offset=offset)
        if page.items and page.items[0].offset > offset:
            yield Gap(missed=page.items[0].offset - offset, offset=page.items[0].offset - 1)
        for item in page.items:
            event = read_event(_decode(converter, item.data), item.offset)
            yield event
            if isinstance(event, Ended):
                return
        offset = max(offset, page.next_offset)
        if page.more_ready:
            continue
        quiet = 0 if page.items else quiet + 1
        if quiet >= POLLS_PER_LIVENESS_CHECK:
            quiet = 0
            ended = await closed()
            if ended is not None:
                yield ended.model_copy(update={"offset": offset})
                return
        await asyncio.sleep(poll_seconds)


def _decode(converter: PayloadConverter, data: str) -> Any:
    payload = Payload()
    payload.ParseFromString(base64.b64decode(data))
    return converter.from_payload(payload)
