"""The loop's own steps as live events, read off what they leave in the array: a rescue
leaves a ``resque`` message, a flush its marker, a compaction its summary, a guardrail a
``blocked`` message. Pure, so the workflow derives them where it announces messages."""

from __future__ import annotations

from typing import Any

from durable_agent._contracts._events import (
    TOOL_RESULT_EVENT_CHARS,
    Compacted,
    Flushed,
    GuardrailBlocked,
    Rescued,
)
from durable_agent._wire._context import COMPACTION
from durable_agent._wire._messages import (
    AssistantMessage,
    FlushMessage,
    Message,
    ResqueMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
)


def step_events(message: Message) -> list[Any]:
    """What the loop did that this appended message records (usually nothing)."""
    if isinstance(message, ResqueMessage):
        return [Rescued(strategy=message.strategy, attempt=message.attempt, reason=message.reason)]
    if isinstance(message, FlushMessage):
        return [Flushed(by=message.by, reason=message.reason)]
    if isinstance(message, SystemMessage) and message.source == COMPACTION:
        return [Compacted(compacts=message.compacts)]
    if isinstance(message, UserMessage | AssistantMessage) and message.blocked is not None:
        kind = "input" if isinstance(message, UserMessage) else "output"
        return [GuardrailBlocked(kind=kind, reason=message.blocked)]
    return []


def result_text(result: ToolMessage) -> str:
    """A tool result's text as a ``tool_finished`` event carries it (bounded)."""
    text = result.content
    if len(text) <= TOOL_RESULT_EVENT_CHARS:
        return text
    return text[:TOOL_RESULT_EVENT_CHARS] + f"... [{len(text)} characters]"
