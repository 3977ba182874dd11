"""Rescuing unusable model replies (a ``resque`` message): telling
an unusable turn apart, what the loop tells the model, and the spec's strategy applied
(correct and ask again, flush and ask afresh, or fail the turn)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from durable_agent._contracts._digests import arguments_problem
from durable_agent._spec._spec import AgentSpec
from durable_agent._spec._structured_output import parse_structured_output
from durable_agent._wire._messages import (
    AssistantMessage,
    FlushMessage,
    RescueStrategy,
    ResqueMessage,
    ToolMessage,
    UserMessage,
)
from durable_agent._wire._transcript import Transcript

from ._state import RescueState
from ._tool_results import error_result


def unusable_reason(
    reply: AssistantMessage,
    tools: Collection[str],
    schema: dict[str, Any] | None,
    *,
    checked: bool = False,
    called: Collection[str] = (),
) -> str | None:
    """Why the loop cannot use this (non-error) turn, or ``None``: tool-call blocks that
    are not calls, a tool that does not exist, arguments that are not a JSON object, an
    empty answer, or an answer that does not match the output schema. ``checked``: its
    worker found every call's arguments a JSON object (a reply of thousands of calls is
    not parsed again in one workflow task); ``called``: the tools it calls, when known."""
    if reply.malformed_tool_calls:
        raw = reply.malformed_tool_calls[0][:200]
        return f"tool-call blocks that could not be read as calls: {raw}"
    calls = reply.tool_calls or []
    if checked and called and all(name in tools for name in called):
        calls = []  # (thousands: every tool known, every call's arguments checked)
    for call in calls:
        name = call.function.name
        if name not in tools:
            available = ", ".join(sorted(tools)) or "none"
            return f"it called a tool that does not exist: {name} (available: {available})"
        problem = None if checked else arguments_problem(call.function.arguments)
        if problem is not None:
            return f"the arguments of its {name} call {problem}"
    if reply.tool_calls:
        return None
    if not reply.content.strip() and reply.refusal is None:
        return "its answer was empty"
    if schema is not None:
        problem = parse_structured_output(reply.content, schema).error
        if problem:
            return f"its answer does not match the output schema: {problem}"
    return None


#: Finish reasons of an answer that stopped before it was complete.
TRUNCATED = frozenset({"length", "content_filter"})


def truncated_reason(reply: AssistantMessage) -> str | None:
    """Why an answer (no calls) is not complete, or ``None``."""
    if reply.tool_calls or reply.is_error or reply.finish_reason not in TRUNCATED:
        return None
    return f"its answer stopped before it was complete (finish_reason {reply.finish_reason})"


def continue_text(reason: str) -> str:
    """What the model reads after a cut answer (``stop.on_truncated`` ``continue``)."""
    return (
        f"Your last answer was cut off: {reason}. Continue it exactly where it stopped, "
        "without repeating what you already wrote."
    )


def corrective_text(reason: str) -> str:
    """What the model reads after an unusable turn (strategy ``correct``)."""
    return (
        f"Your last reply could not be used: {reason}. Reply again: call only the tools "
        "you were given, with a JSON object of arguments, or answer in the required format."
    )


def not_run_results(reply: AssistantMessage, reason: str) -> list[ToolMessage]:
    """Results for the calls of an unusable turn that the loop does not run (strategies
    ``flush`` and ``fail``): the array stays paired. They carry the reply's time."""
    stamp = {"timestamp": reply.timestamp, "mode": "tool"}
    return [
        error_result(
            call,
            f"Error calling '{call.function.name}': not run, the turn could not be used ({reason})",
        ).model_copy(update=stamp)
        for call in reply.tool_calls or ()
    ]


class Rescue:
    """Applies the spec's rescue strategy to the array and its slice of the carried
    state. Each method answers why the turn must end instead (strategy ``fail``, or
    attempts spent); otherwise the model is asked again, or (``correct`` with calls to
    run) the calls run first and ``after_tools`` says why the rescue follows them."""

    def __init__(self, spec: AgentSpec, state: RescueState, messages: Transcript) -> None:
        self.spec = spec
        self.state = state
        self.messages = messages

    def unusable(self, reply: AssistantMessage, reason: str) -> str | None:
        """An unusable turn joins the array; with ``correct`` and attempts left its calls
        run as usual (the model reads their errors) and the rescue follows their results;
        otherwise its calls get results saying they did not run, and the rescue is now."""
        state = self.state
        self.messages.join(reply)
        attempts_left = state.attempts < self.spec.rescue.max_attempts
        if reply.tool_calls and attempts_left and self.spec.rescue.strategy == "correct":
            state.after_tools = reason
            return None
        self.messages.join_all(not_run_results(reply, reason))
        return self.rescue(reason, reply.timestamp)

    def truncated(self, reply: AssistantMessage, reason: str) -> str | None:
        """A cut answer joins the array and the model is asked to go on (``correct``
        with the words for it), while attempts are left."""
        self.messages.join(reply)
        return self.rescue(reason, reply.timestamp, "correct", continue_text(reason))

    def rescue(
        self,
        reason: str,
        at: int | None,
        strategy: RescueStrategy | None = None,
        text: str | None = None,
    ) -> str | None:
        """Record the rescue step and apply the strategy (the spec's unless given;
        ``fail`` once attempts are out)."""
        state = self.state
        state.attempts += 1
        attempt = state.attempts
        strategy = strategy or self.spec.rescue.strategy
        if attempt > self.spec.rescue.max_attempts:
            strategy = "fail"
        content = (text or corrective_text(reason)) if strategy == "correct" else reason
        self.messages.join(
            ResqueMessage(
                content=content,
                reason=reason,
                strategy=strategy,
                attempt=attempt,
                mode="tool",
                timestamp=at,
            )
        )
        if strategy == "fail":
            tries = self.spec.rescue.max_attempts
            return (
                f"the model's reply could not be used: {reason}. Send the message again (a "
                f"later reply may do), allow more corrections (rescue.max_attempts, now "
                f"{tries}), or use a model that keeps to the tools' and the answer's schemas"
            )
        if strategy == "flush":
            latest = self._latest_user_message()
            self.messages.join(FlushMessage(by="rescue", reason=reason, mode="tool", timestamp=at))
            if latest is not None:  # asked again, afresh (a message of its own: its own id)
                again: dict[str, Any] = {"mode": "tool", "timestamp": at}
                if self.messages.ids:
                    again.update(id=None, given_id=None)
                self.messages.join(latest.model_copy(update=again))
        return None

    @property
    def calls_first(self) -> bool:
        """The unusable turn's calls run before its rescue (``correct`` with calls)."""
        return self.state.after_tools is not None

    def new_reply(self) -> None:
        """A new reply is asked for: its attempts start at none."""
        self.state.attempts = 0

    def take_after_tools(self) -> str | None:
        """Why a rescue follows the batch that just finished (``None``: none does)."""
        reason, self.state.after_tools = self.state.after_tools, None
        return reason

    def _latest_user_message(self) -> UserMessage | None:
        for message in reversed(self.messages):
            if isinstance(message, UserMessage) and message.blocked is None:
                return message
        return None
