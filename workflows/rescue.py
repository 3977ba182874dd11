"""Model rescue (seed 002's ``resque``): telling an unusable model turn apart, and what
the loop says about it. Pure; the Session applies the spec's strategy."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from durable_agent.messages import AssistantMessage, ToolMessage
from durable_agent.structured_output import parse_structured_output
from durable_agent.workflows.turn_logic import error_result


def unusable_reason(
    reply: AssistantMessage, tools: Collection[str], schema: dict[str, Any] | None
) -> str | None:
    """Why the loop cannot use this (non-error) turn, or ``None``: tool-call blocks that
    are not calls, a tool that does not exist, arguments that are not a JSON object, an
    empty answer, or an answer that does not match the output schema."""
    if reply.malformed_tool_calls:
        raw = reply.malformed_tool_calls[0][:200]
        return f"tool-call blocks that could not be read as calls: {raw}"
    for call in reply.tool_calls or ():
        name, arguments = call.function.name, call.function.arguments
        if name not in tools:
            available = ", ".join(sorted(tools)) or "none"
            return f"it called a tool that does not exist: {name} (available: {available})"
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return f"the arguments of its {name} call are not valid JSON"
        if not isinstance(parsed, dict):
            return f"the arguments of its {name} call are not a JSON object"
    if reply.tool_calls:
        return None
    if not reply.content.strip() and reply.refusal is None:
        return "its answer was empty"
    if schema is not None:
        problem = parse_structured_output(reply.content, schema).error
        if problem:
            return f"its answer does not match the output schema: {problem}"
    return None


def corrective_text(reason: str) -> str:
    """What the model reads after an unusable turn (strategy ``correct``)."""
    return (
        f"Your last reply could not be used: {reason}. Reply again: call only the tools "
        "you were given, with a JSON object of arguments, or answer in the required format."
    )


def not_run_results(reply: AssistantMessage, reason: str) -> list[ToolMessage]:
    """Results for the calls of an unusable turn that the loop does not run (strategies
    ``flush`` and ``fail``): the array stays paired."""
    return [
        error_result(
            call,
            f"Error calling '{call.function.name}': not run, the turn could not be used ({reason})",
        )
        for call in reply.tool_calls or ()
    ]
