"""Branches of a conversation (pure): where a fork may cut an array, the array a fork
starts from, and where two branches part.

A fork point may not fall inside a tool batch: an assistant message's calls and their
results (in request order, right after it) stay together, or the branch would begin
with calls nobody answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from durable_agent._wire._messages import AssistantMessage, Message, SystemMessage, ToolMessage


def fork_problem(messages: Sequence[Message], at: int) -> str | None:
    """Why the first ``at`` messages of ``messages`` cannot start a branch (``None``:
    they can)."""
    if at < 1 or at > len(messages):
        return f"fork at {at}: the session has {len(messages)} messages (fork at 1 to it)"
    for index in range(at - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls = len(message.tool_calls)
            answered = sum(isinstance(m, ToolMessage) for m in messages[index + 1 : at])
            if answered < calls:
                after = index + 1 + calls
                return (
                    f"fork at {at}: that splits the tool batch of message {index} "
                    f"({answered} of its {calls} results before it); fork at {index} or "
                    f"{after}"
                )
            return None
        if not isinstance(message, ToolMessage):
            return None
    return None


def with_instructions(messages: list[Message], instructions: str | None) -> list[Message]:
    """The branch's array under the new spec's instructions: its first system message
    says them instead (the parent's array is not touched)."""
    if instructions is None or not messages or not isinstance(messages[0], SystemMessage):
        return messages
    if messages[0].content == instructions:
        return messages
    return [messages[0].model_copy(update={"content": instructions}), *messages[1:]]


@dataclass(frozen=True)
class BranchDiff:
    """Two conversations from where they part: ``common`` messages are the same in
    both; ``left`` and ``right`` are what each has after them."""

    common: int
    left: list[Message]
    right: list[Message]


def diff_branches(left: Sequence[Message], right: Sequence[Message]) -> BranchDiff:
    """Where two arrays part. Messages compare by what they say (role, text, calls),
    not by when they were written or who approved a call (its result says what it
    did)."""
    common = 0
    for a, b in zip(left, right, strict=False):
        if _said(a) != _said(b):
            break
        common += 1
    return BranchDiff(common, list(left[common:]), list(right[common:]))


def message_line(message: Message, width: int = 100) -> str:
    """A message in one line, for reports: its role, its text (spaces folded, cut at
    ``width``) and its tool calls."""
    text = message.content if isinstance(message.content, str) else "[parts]"
    said = " ".join(text.split())[:width]
    calls = getattr(message, "tool_calls", None) or []
    called = ", ".join(f"{c.function.name}({c.function.arguments})" for c in calls)
    return f"{message.role}: " + " ".join(p for p in (said, called and f"-> {called}") if p)


def _said(message: Message) -> object:
    return message.model_dump(mode="json", exclude={"timestamp", "usage", "model", "approval"})
