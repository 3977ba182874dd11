"""``prepare_request_messages``: the one place the outgoing array is shaped.

Storage keeps every message whole; what a provider receives is derived here,
once, for every codec: the window after flushes and compaction summaries, messages
a guardrail blocked left out, rescue messages as the user's words, the context
budget, pairing repaired, failed turns left out, and the reasoning rule applied
(the wire-format guide's "Interleaved Thinking"). Preparing a prepared array changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from durable_agent._wire._context import ContextRules, fit_to_budget, request_window
from durable_agent._wire._messages import (
    AssistantMessage,
    Message,
    ResqueMessage,
    ToolMessage,
    UserMessage,
)
from durable_agent._wire._model_options import ModelOptions
from durable_agent._wire._pairing import repair_pairing


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


def _as_sent(message: Message) -> Message | None:
    """A message as a model may see it: blocked ones not at all; a rescue's corrective
    text as the user's (every API has a user role; none has ``resque``)."""
    if isinstance(message, UserMessage | AssistantMessage) and message.blocked is not None:
        return None
    if isinstance(message, ResqueMessage):
        if message.strategy != "correct":
            return None
        return UserMessage(content=message.content, mode="tool")
    return message


class PreparedMessages(list[Message]):
    """An array ``prepare_request_messages`` shaped: preparing it again (for the same
    context budget, or none) returns it as it is, so a model call shapes its request
    once however many layers (the activity, the codec, its builder) ask for it."""

    def __init__(
        self, messages: Sequence[Message], context: ContextRules | None, left_out: int
    ) -> None:
        super().__init__(messages)
        self.context = context
        self.left_out = left_out
        """Messages the context budget left out (0 without a budget)."""


def prepare_request_messages(
    messages: Sequence[Message], context: ContextRules | None = None
) -> PreparedMessages:
    """A fresh array ready for any codec; the input is not modified."""
    if isinstance(messages, PreparedMessages) and context in (None, messages.context):
        return messages
    window = [m for m in map(_as_sent, request_window(messages)) if m is not None]
    left_out = 0
    if context is not None:
        fitted = fit_to_budget(window, context)
        kept = {id(m) for m in fitted}
        left_out = sum(1 for m in window if id(m) not in kept and not _is_failed_turn(m))
        window = fitted
    prepared: list[Message] = []
    for message in repair_pairing([m for m in window if not _is_failed_turn(m)]):
        if isinstance(message, AssistantMessage):
            message = apply_reasoning_rule(message)
        prepared.append(message)
    return PreparedMessages(prepared, context, left_out)


def options_for_call(options: ModelOptions, messages: Sequence[Message]) -> ModelOptions:
    """``tool_choice`` ``required`` or a named tool binds the first model call of a turn
    only: once tools have run since the latest user message the model may answer
    (``auto``), or the loop could never end. (The OpenAI Agents SDK does the same.)"""
    if options.tool_choice in (None, "auto", "none"):
        return options
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            return options.model_copy(update={"tool_choice": None})
        if isinstance(message, UserMessage):
            break
    return options
