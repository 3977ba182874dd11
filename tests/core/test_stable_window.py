"""The window past the context budget keeps its start: cut to a share of the budget at
a user message, then extended request after request until the budget is reached again,
so each request is the one before with messages added (what a prompt cache serves)."""

from __future__ import annotations

import itertools

from durable_agent._wire.context import ContextRules
from durable_agent._wire.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from durable_agent._wire.outgoing import prepare_request_messages
from durable_agent.testing import assistant_calls

RULES = ContextRules(budget_tokens=6000)  # about 24,000 characters


def conversation(turns: int) -> list[tuple[list[Message], int]]:
    """The array at each model call of ``turns`` turns (a question, a call, a 1.5 KB
    result, an answer): the array and the call's index."""
    messages: list[Message] = [SystemMessage(content="You look things up.")]
    calls: list[tuple[list[Message], int]] = []
    for turn in range(turns):
        messages.append(UserMessage(content=f"question {turn}: " + "q" * 100))
        calls.append((list(messages), len(calls)))
        call = assistant_calls(("lookup", {"turn": turn}))
        assert call.tool_calls is not None
        messages.append(call)
        messages.append(
            ToolMessage(tool_call_id=call.tool_calls[0].id, content=f"result {turn} " + "r" * 1500)
        )
        calls.append((list(messages), len(calls)))
        messages.append(AssistantMessage(content=f"answer {turn}: " + "a" * 200))
    return calls


def test_requests_past_the_budget_extend_the_one_before_between_cuts() -> None:
    windows = [list(prepare_request_messages(m, RULES)) for m, _ in conversation(60)]
    extended = cuts = 0
    for before, after in itertools.pairwise(windows):
        if after[: len(before)] == before:
            extended += 1
        else:
            cuts += 1
    for window in windows:
        assert sum(len(str(m.content)) for m in window) / 4 <= RULES.budget_tokens
        first = next(m for m in window if not isinstance(m, SystemMessage))
        assert isinstance(first, UserMessage), "a window starts with a question"
    # cut only when the budget is reached (60 turns of 1.9 KB over 24 KB: a few times), never
    # on every request as a sliding window does once past its budget
    assert 0 < cuts <= 10, (cuts, extended)
    assert extended >= 0.9 * (len(windows) - 1), (cuts, extended)


def test_the_start_is_the_same_whoever_works_it_out() -> None:
    """The start is a function of the messages alone: the window of a prefix is the
    window the longer array had at that point (no state, no history of requests)."""
    calls = conversation(30)
    full, _ = calls[-1]
    for messages, _ in calls[::7]:
        assert list(prepare_request_messages(messages, RULES)) == list(
            prepare_request_messages(full[: len(messages)], RULES)
        )
