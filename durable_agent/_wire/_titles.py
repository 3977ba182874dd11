"""A session's title, for listings (Temporal memo ``title``): its first user words.

Pure, and shared: the workflow titles a session by it, and ``AgentClient.start`` puts
the same title in the start's memo, which saves the run an upsert of its memo (an
event, and a write to the server's visibility store) when the two agree.
"""

from __future__ import annotations

from collections.abc import Sequence

from durable_agent._wire._messages import Message, UserMessage


def session_title(messages: Sequence[Message], limit: int = 80) -> str:
    """The session's first user words, for listings (Temporal memo ``title``)."""
    for message in messages:
        if isinstance(message, UserMessage):
            content = message.content
            text = (
                content
                if isinstance(content, str)
                else " ".join(getattr(part, "text", "") for part in content)
            )
            text = " ".join(text.split())
            return text if len(text) <= limit else text[: limit - 3] + "..."
    return ""


def start_title(history: Sequence[Message], message: str | UserMessage | None) -> str:
    """The title of a session started with ``history`` and ``message``, as its run will
    work it out (the run upserts its own over a wrong one)."""
    if isinstance(message, str):
        message = UserMessage(content=message)
    return session_title([*history, message] if message is not None else history)
