"""``prepare_request_messages``: the one place the outgoing array is shaped.

Storage keeps every message whole; what a provider receives is derived here,
once, for every codec: pairing repaired, failed turns left out, and the
reasoning rule applied (seed 000, "Interleaved Thinking").
"""

from __future__ import annotations

from collections.abc import Sequence

from durable_agent.messages import AssistantMessage, Message
from durable_agent.pairing import repair_pairing


def _is_failed_turn(message: Message) -> bool:
    # A turn whose stream broke or came back blank never came whole from the model.
    # A refusal did, so it stays.
    return (
        isinstance(message, AssistantMessage)
        and bool(message.is_error)
        and not message.tool_calls
        and message.refusal is None
    )


def apply_reasoning_rule(message: AssistantMessage) -> AssistantMessage:
    """Keep reasoning on tool-call turns (providers require it there); drop it elsewhere."""
    if message.tool_calls:
        return message
    if message.reasoning is None and message.reasoning_details is None:
        return message
    return message.model_copy(update={"reasoning": None, "reasoning_details": None})


def prepare_request_messages(messages: Sequence[Message]) -> list[Message]:
    """A fresh array ready for any codec; the input is not modified."""
    prepared: list[Message] = []
    for message in repair_pairing([m for m in messages if not _is_failed_turn(m)]):
        if isinstance(message, AssistantMessage):
            message = apply_reasoning_rule(message)
        prepared.append(message)
    return prepared
