"""The turn vectors' loop events, read off our live event log through a stated mapping.

The vectors' engine calls back with events; durable-agent publishes a live log
(docs/how-to/live-sessions.md). Theirs from ours:

- ``status`` "Starting agent loop": the first assistant message with tool calls;
- ``tool_call_start`` (name, arguments): ``tool_started`` (its call's arguments);
- ``tool_result`` (name, result): ``tool_finished`` (its ``result``);
- ``messages_updated`` (message_count, the vectors' count): when a batch's results
  join the array, unless the turn was cancelled inside the batch (their loop then
  appends nothing);
- ``status`` "Injecting steering message" and ``messages_updated``: a user message
  that joins the array once the loop has started;
- ``cancelled``: ``turn_ended`` with reason ``cancelled`` (their reason's words are
  their own: only the type is compared);
- ``done`` (response): ``ended`` with an answer.

Only the fields a vector lists are compared; a vector listing kinds without data is
compared as a sequence those kinds appear in (``matches``).
"""

from __future__ import annotations

from typing import Any

from durable_agent._contracts.events import LiveEvent
from durable_agent._wire.messages import AssistantMessage, Message, ToolMessage, UserMessage

#: What a result of a call the cancellation stopped begins with (tool_results.py).
CANCELLED_RESULT = "not completed, turn cancelled"


def vector_count(messages: list[Message]) -> int:
    """The vectors' message count: one more than the array once a tool turn happened."""
    return len(messages) + (1 if any(isinstance(m, ToolMessage) for m in messages) else 0)


def their_events(ours: list[LiveEvent], messages: list[Message]) -> list[dict[str, Any]]:
    calls = {
        call.id: call
        for m in messages
        if isinstance(m, AssistantMessage)
        for call in m.tool_calls or []
    }
    theirs: list[dict[str, Any]] = []
    started = False
    for k, event in enumerate(ours):
        if event.type == "message_appended" and event.message is not None:
            message, index = event.message, event.index
            if isinstance(message, AssistantMessage) and message.tool_calls and not started:
                started = True
                theirs.append({"type": "status", "data": {"message": "Starting agent loop"}})
            elif isinstance(message, UserMessage) and started:
                theirs.append({"type": "status", "data": {"message": "Injecting steering message"}})
                theirs.append(_updated(messages, index))
            elif isinstance(message, ToolMessage) and _last_of_batch(ours, k):
                batch = _batch_results(ours, k)
                if not any(CANCELLED_RESULT in r.content for r in batch):
                    theirs.append(_updated(messages, index))
        elif event.type == "tool_started":
            arguments = calls[event.call_id].function.arguments
            theirs.append(
                {"type": "tool_call_start", "data": {"name": event.name, "arguments": arguments}}
            )
        elif event.type == "tool_finished":
            theirs.append(
                {"type": "tool_result", "data": {"name": event.name, "result": event.result}}
            )
        elif event.type == "turn_ended" and event.reason == "cancelled":
            theirs.append({"type": "cancelled", "data": {}})
        elif event.type == "ended" and event.result is not None and event.result.final:
            theirs.append({"type": "done", "data": {"response": event.result.final.content}})
    return theirs


def _updated(messages: list[Message], index: int) -> dict[str, Any]:
    return {
        "type": "messages_updated",
        "data": {"message_count": vector_count(messages[: index + 1])},
    }


def _appended_tool(event: LiveEvent) -> bool:
    return (
        event.type == "message_appended"
        and event.message is not None
        and isinstance(event.message, ToolMessage)
    )


def _last_of_batch(ours: list[LiveEvent], k: int) -> bool:
    following = [e for e in ours[k + 1 :] if e.type == "message_appended"]
    return not following or not _appended_tool(following[0])


def _batch_results(ours: list[LiveEvent], k: int) -> list[ToolMessage]:
    batch: list[ToolMessage] = []
    for event in reversed(ours[: k + 1]):
        if event.type != "message_appended":
            continue
        if not _appended_tool(event):
            break
        assert isinstance(event.message, ToolMessage)
        batch.append(event.message)
    return batch


def matches(expected: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> bool:
    """The same types in the same order, and every field a vector lists equal. A vector
    whose events carry no data names only the kinds it checks, in order, and others may
    come between (``events_error_logged`` leaves out the ``status`` that the same loop
    sends in ``events_basic_tool_loop``)."""
    if not any(e.get("data") for e in expected):
        kinds = iter(t["type"] for t in theirs)
        return all(any(kind == e["type"] for kind in kinds) for e in expected)
    if [e["type"] for e in expected] != [t["type"] for t in theirs]:
        return False
    for want, got in zip(expected, theirs, strict=True):
        data = want.get("data") or {}
        if want["type"] == "cancelled":
            continue  # the reason is in their words
        if any(got["data"].get(key) != value for key, value in data.items()):
            return False
    return True
