"""Messages and status as a person reads them in a terminal."""

from __future__ import annotations

import json
import textwrap

from durable_agent.contracts import PendingApproval, SessionStatus
from durable_agent.messages import AssistantMessage, Message, ToolMessage

_PHASES = {
    "starting": "starting",
    "calling_model": "calling model",
    "awaiting_approval": "awaiting approval",
    "running_tools": "running tools",
    "idle": "waiting for a message",
    "done": "done",
    "failed": "failed",
}


def _content_text(message: Message) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    return " ".join(getattr(part, "text", f"[{part.type}]") for part in content)


def format_message(message: Message, width: int = 100) -> str:
    """One message as a labelled, wrapped block."""
    label = f"{message.role:<9} "
    lines: list[str] = []
    if isinstance(message, AssistantMessage) and message.is_error:
        lines.append(f"error: {message.error}")
    text = _content_text(message)
    if isinstance(message, ToolMessage):
        marker = " (error)" if message.is_error else ""
        text = f"{message.tool_name or message.tool_call_id}{marker}: {text}"
    if text:
        lines.extend(textwrap.wrap(text, width - len(label)) or [""])
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls or []:
            lines.append(f"-> {call.function.name} {call.function.arguments}")
    body = lines or [""]
    pad = " " * len(label)
    return "\n".join([label + body[0], *(pad + line for line in body[1:])])


def format_pending(pending: PendingApproval) -> str:
    deadline = f" (deadline {pending.deadline:%Y-%m-%d %H:%M:%S}Z)" if pending.deadline else ""
    return f"{pending.approval_id}: {pending.tool_name} {pending.arguments}{deadline}"


def status_line(status: SessionStatus) -> str:
    """The live status: what the session is doing right now."""
    phase = _PHASES.get(status.phase, status.phase)
    if status.phase == "awaiting_approval":
        phase += f" ({len(status.pending_approvals)})"
    return f"[turn {status.turn}] {phase}"


def format_status(status: SessionStatus) -> str:
    usage = status.usage
    lines = [
        f"phase:          {_PHASES.get(status.phase, status.phase)}",
        f"turn:           {status.turn}",
        f"messages:       {status.message_count} (+{status.queued_messages} queued)",
        f"runs:           {status.runs}",
        f"tokens:         {usage.prompt_tokens} in, {usage.completion_tokens} out",
    ]
    if status.last_error:
        lines.append(f"last error:     {status.last_error}")
    for pending in status.pending_approvals:
        lines.append(f"pending:        {format_pending(pending)}")
    for rejected in status.rejected_signals:
        lines.append(f"rejected:       {rejected}")
    return "\n".join(lines)


def message_json(message: Message) -> str:
    return json.dumps(message.model_dump(mode="json", exclude_none=True), ensure_ascii=False)
