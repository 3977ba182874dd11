"""Reading a session's live event log (``SessionHandle.follow``).

The log is temporalio's contrib workflow stream; it is read here through the stream's
own poll *query*, not its long-poll update: a query leaves nothing in the session's
history, so any number of readers (a gateway, many browser tabs) cost the session
nothing, where each update poll would write its answer into history for good. A
reader that is caught up asks again after ``poll_seconds``.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowHandle, WorkflowQueryFailedError, WorkflowQueryRejectedError
from temporalio.contrib.workflow_streams import PollInput, PollResult
from temporalio.converter import PayloadConverter
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._contracts._events import EVENTS_TOPIC, Ended, Gap, LiveEvent, read_event

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
