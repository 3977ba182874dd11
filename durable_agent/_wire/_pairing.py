"""Pairing tool results with tool calls by position, never by id.

Providers reuse ids (every call ``call_0``, every turn), so a result is paired
by order: the tool messages that directly follow an assistant turn answer its
calls one by one, result k answering call k.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from durable_agent._wire._messages import AssistantMessage, Message, ToolCall, ToolMessage

#: Text of the result inserted for a call that has none, so the wire stays paired.
MISSING_RESULT_TEXT = "Error: this tool call was not executed; no result was recorded."


@dataclass(frozen=True)
class ToolExchange:
    """One assistant turn's calls and the results that answer them, position by position."""

    assistant_index: int
    calls: tuple[ToolCall, ...]
    results: tuple[ToolMessage | None, ...]
    """``results[k]`` answers ``calls[k]``; ``None`` marks a dangling call."""
    result_indices: tuple[int, ...]
    """Array indices of the results present, in order."""

    @property
    def dangling(self) -> tuple[int, ...]:
        return tuple(k for k, r in enumerate(self.results) if r is None)


@dataclass(frozen=True)
class PairingReport:
    exchanges: tuple[ToolExchange, ...]
    orphan_indices: tuple[int, ...]
    """Tool messages that answer no call (no preceding tool-call turn, or one too many)."""

    @property
    def is_paired(self) -> bool:
        return not self.orphan_indices and all(not e.dangling for e in self.exchanges)


def pair_tool_results(messages: Sequence[Message]) -> PairingReport:
    exchanges: list[ToolExchange] = []
    orphans: list[int] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if isinstance(message, ToolMessage):
            orphans.append(i)  # not preceded by a tool-call turn
            i += 1
            continue
        if not (isinstance(message, AssistantMessage) and message.tool_calls):
            i += 1
            continue
        calls = tuple(message.tool_calls)
        run_start = i + 1
        run_end = run_start
        while run_end < len(messages) and isinstance(messages[run_end], ToolMessage):
            run_end += 1
        run = list(range(run_start, run_end))
        answered = run[: len(calls)]
        orphans.extend(run[len(calls) :])
        results: list[ToolMessage | None] = [messages[j] for j in answered]  # type: ignore[misc]
        results.extend([None] * (len(calls) - len(answered)))
        exchanges.append(
            ToolExchange(
                assistant_index=i,
                calls=calls,
                results=tuple(results),
                result_indices=tuple(answered),
            )
        )
        i = run_end
    return PairingReport(exchanges=tuple(exchanges), orphan_indices=tuple(orphans))


def repair_pairing(messages: Sequence[Message]) -> list[Message]:
    """A fresh array in which every call has exactly one result directly after its turn.

    Orphan results are dropped; a dangling call gets an error result, so a
    provider never sees a call without an answer or an answer without a call.
    """
    report = pair_tool_results(messages)
    if report.is_paired:
        return list(messages)
    orphans = set(report.orphan_indices)
    missing_after: dict[int, list[ToolMessage]] = {}
    for exchange in report.exchanges:
        if not exchange.dangling:
            continue
        last = exchange.result_indices[-1] if exchange.result_indices else exchange.assistant_index
        missing_after[last] = [
            ToolMessage(
                tool_call_id=exchange.calls[k].id,
                content=MISSING_RESULT_TEXT,
                tool_name=exchange.calls[k].function.name,
                is_error=True,
            )
            for k in exchange.dangling
        ]
    repaired: list[Message] = []
    for index, message in enumerate(messages):
        if index not in orphans:
            repaired.append(message)
        repaired.extend(missing_after.get(index, ()))
    return repaired


def call_positions(messages: Sequence[Message]) -> dict[int, tuple[int, int]]:
    """Map each paired tool message's index to (assistant index, call position)."""
    positions: dict[int, tuple[int, int]] = {}
    for exchange in pair_tool_results(messages).exchanges:
        for k, index in enumerate(exchange.result_indices):
            positions[index] = (exchange.assistant_index, k)
    return positions
