"""The results the loop writes itself for calls that did not run as asked: refused,
denied, cancelled, over the limit, failed; and a call's one-line summary."""

from __future__ import annotations

from durable_agent._contracts._contracts import (
    CancelTurnSignal,
    EndSessionSignal,
    GuardrailVerdict,
)
from durable_agent._wire._messages import ApprovalRecord, ToolCall, ToolMessage


def error_result(call: ToolCall, text: str) -> ToolMessage:
    return ToolMessage(
        tool_call_id=call.id, content=text, tool_name=call.function.name, is_error=True
    )


def cancel_text(by: str | None, reason: str | None) -> str:
    """Why a turn stopped, as results and ``status`` say it."""
    who = f" by {by}" if by else ""
    return f"turn cancelled{who}" + (f": {reason}" if reason else "")


def cancelled_result(call: ToolCall, why: str) -> ToolMessage:
    """The slot of a call the turn's cancellation stopped (or kept from starting)."""
    return error_result(call, f"Error calling '{call.function.name}': not completed, {why}")


def tool_error_result(call: ToolCall, detail: str) -> ToolMessage:
    """The result of a call that failed for good, for the model to read."""
    return error_result(call, f"Error calling '{call.function.name}': {detail}")


def over_call_limit(asked: int, limit: int) -> str:
    return (
        f"Not run: this turn asked for {asked} tool calls and at most {limit} run in one "
        "turn (stop.max_tool_calls_per_turn). Ask again for the ones still needed."
    )


def denial_result(call: ToolCall, record: ApprovalRecord) -> ToolMessage:
    who = "by policy" if record.by is None else f"by {record.by}"
    if record.timed_out:
        who = "(no decision before the approval deadline)"
    reason = f": {record.reason}" if record.reason else ""
    return ToolMessage(
        tool_call_id=call.id,
        content=f"Tool call denied {who}{reason}",
        tool_name=call.function.name,
        is_error=True,
        approval=record,
    )


def guardrail_denial(call: ToolCall, reason: str) -> ToolMessage:
    return ToolMessage(
        tool_call_id=call.id,
        content=f"Tool denied by guardrail: {reason}",
        tool_name=call.function.name,
        is_error=True,
        approval=ApprovalRecord(decision="denied", by="policy", reason=reason),
    )


def call_summary(call: ToolCall, limit: int = 120) -> str:
    arguments = call.function.arguments
    if len(arguments) > limit:
        arguments = arguments[: limit - 3] + "..."
    return f"{call.function.name} {arguments}"


def not_completed(cancel: CancelTurnSignal | None, ending: EndSessionSignal | None) -> str | None:
    """Why calls without a result did not complete: a cancellation, or the end."""
    if cancel is not None:
        return cancel_text(cancel.by, cancel.reason)
    if ending is not None:
        return cancel_text(ending.by, ending.reason or "the session ended")
    return None


def guardrail_text(kind: str, verdict: GuardrailVerdict | None, reason: str) -> str:
    """Why a guardrail stopped a message or an answer, as ``status`` shows it."""
    by = f" {verdict.by}" if verdict is not None and verdict.by else ""
    return f"{kind} guardrail{by}: {reason}"
