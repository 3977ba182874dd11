"""Message arrays compared across runs: the same conversation, made at other times."""

from __future__ import annotations

from typing import Any

from durable_agent._wire.messages import dump_messages


def without_times(messages: list[Any]) -> list[dict[str, Any]]:
    """Messages without the times they were made at (their own and their approval's),
    nor the tokens a lost worker's attempts billed (``voided_usage``): all that differs
    between a run disturbed by kills and its undisturbed twin."""
    plain = []
    for message in dump_messages(messages):
        message.pop("timestamp", None)
        message.pop("voided_usage", None)
        message.get("approval", {}).pop("at", None)
        plain.append(message)
    return plain
