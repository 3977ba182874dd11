"""A message of thousands of tool calls read a page per workflow task.

Decoding a reply of 2,500 calls takes its task longer than a reply of a hundred takes
all of its work, and so does a page read back that holds it after continue-as-new. The
worker sends such a message with its first ``CALLS_PER_PAGE`` calls (and keeps it whole
in the store); the rest come from ``reply_calls``, one page per activity, so each task
decodes one page. Pages are read one after the other: results of activities running
at once would arrive in one task together. Until they are read, the store holds the
only whole copy: a store that lost it is answered by asking the model again
(``model_calls``).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts._digests import ReplyCallsInput, with_calls
    from durable_agent._failures import Failure
    from durable_agent._wire._messages import AssistantMessage, Message, ToolCall

    from .patches import CALLS_IN_PAGES_PATCH, retired
    from .retries import LOST_WORK_RETRIES

#: Tool calls one payload brings at most (a task decodes a page in about a millisecond).
CALLS_PER_PAGE = 250


def calls_per_page() -> int:
    """What a session's model setup and a page read back ask for."""
    retired(CALLS_IN_PAGES_PATCH)  # some runs of the previous release asked it here
    return CALLS_PER_PAGE


async def whole_message(
    message: Message, key: str, calls: int, heartbeat: timedelta | None
) -> tuple[AssistantMessage, frozenset[str]]:
    """``message`` (cut to its first tool calls) with all ``calls`` of them, read from the
    store where the worker kept it under ``key``, a page at a time, each page as long as
    the first (the page the worker chose; a replay reads the same pages); and the names
    of the tools it calls, gathered one page per workflow task."""
    if not isinstance(message, AssistantMessage) or not message.tool_calls:
        raise ApplicationError("only a message with tool calls is sent in pages")
    read: list[ToolCall] = list(message.tool_calls)
    called = {call.function.name for call in read}
    per_page = len(read)
    while len(read) < calls:
        start, stop = len(read), min(len(read) + per_page, calls)
        page: list[ToolCall] = await workflow.execute_activity(
            "reply_calls",
            ReplyCallsInput(key=key, start=start, stop=stop),
            result_type=list[ToolCall],
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=heartbeat,
            retry_policy=LOST_WORK_RETRIES,
            summary=f"reply_calls {start}-{stop} of {calls}",
        )
        if len(page) != stop - start:
            raise ApplicationError(
                f"the store holds {start + len(page)} of the message's {calls} tool calls",
                type=Failure.TRANSCRIPT_MISMATCH,
                non_retryable=True,
            )
        read.extend(page)
        called.update(call.function.name for call in page)
    return with_calls(message, read), frozenset(called)
