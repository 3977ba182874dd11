"""Messages and status as a person reads them in a terminal: formatting, the output stream
that shows session text's control characters as escapes (``VisibleWriter``), and the
message log, one message a line with its context (``MessageLog``)."""

from __future__ import annotations

import io
import json
import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

from durable_agent._contracts.approvals import Grant, PendingApproval
from durable_agent._contracts.boundary import SessionStatus
from durable_agent._contracts.wake_ups import describe
from durable_agent._wire.context import is_summary, window_start
from durable_agent._wire.messages import (
    ApprovalRecord,
    AssistantMessage,
    FlushMessage,
    Message,
    ResqueMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    visible,
)

_PHASES = {
    "starting": "starting",
    "checking_guardrails": "checking guardrails",
    "compacting": "compacting the context",
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


def approval_note(record: ApprovalRecord) -> str | None:
    """How a call was let through, in a few words (a denial says so in its result)."""
    if record.decision == "denied":
        return None
    who = ""
    if record.by:
        who = f" by {record.by}" + (" (signed)" if record.verified else "")
    if record.timed_out:
        return "approved by default at the deadline"
    if record.decision == "responded":
        return f"answered{who} in the tool's place"
    if record.by is None and record.rule is not None:
        return f"allowed by rule {record.rule}"
    note = f"approved{who}"
    if record.grant is not None:
        note += f", standing {record.grant}"
    if record.arguments is not None:
        note += f", arguments edited to {record.arguments}"
    if record.escalated:
        note += ", after escalation"
    return note


def format_message(message: Message, width: int = 100) -> str:
    """One message as a labelled, wrapped block."""
    label = f"{'summary' if is_summary(message) else message.role:<9} "
    lines: list[str] = []
    if isinstance(message, AssistantMessage) and message.is_error:
        lines.append(f"error: {message.error}")
    if isinstance(message, UserMessage | AssistantMessage) and message.blocked:
        lines.append(f"blocked by a guardrail: {message.blocked}")
    if isinstance(message, FlushMessage):
        who = f" by {message.by}" if message.by else ""
        lines.append(
            f"--- history flushed{who}" + (f": {message.reason}" if message.reason else "")
        )
    if isinstance(message, ResqueMessage):
        why = message.reason or message.content
        lines.append(f"rescue ({message.strategy or 'recorded'}, attempt {message.attempt}): {why}")
    text = _content_text(message)
    if isinstance(message, ToolMessage):
        marker = " (error)" if message.is_error else ""
        text = f"{message.tool_name or message.tool_call_id}{marker}: {text}"
    if text:
        lines.extend(textwrap.wrap(text, width - len(label)) or [""])
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls or []:
            lines.append(f"-> {call.function.name} {call.function.arguments}")
    if isinstance(message, ToolMessage) and message.approval is not None:
        note = approval_note(message.approval)
        if note:
            lines.append(f"({note})")
    body = lines or [""]
    if message.agent_name:  # a swarm: whose message it is
        body[0] = f"[{message.agent_name}] {body[0]}".rstrip()
    pad = " " * len(label)
    return "\n".join([label + body[0], *(pad + line for line in body[1:])])


def format_history(messages: Sequence[Message], width: int = 100) -> list[str]:
    """The whole array; messages later requests no longer include (a flush or a summary
    stands in for them) are marked ``compacted``."""
    start = window_start(messages)[0]
    blocks = []
    for index, message in enumerate(messages):
        block = format_message(message, width)
        left_out = not isinstance(message, SystemMessage | FlushMessage) or is_summary(message)
        if index < start and left_out:
            lines = block.splitlines()
            lines[0] += "  (compacted)"
            block = "\n".join(f"~ {line}" for line in lines)
        blocks.append(block)
    return blocks


def format_grant(grant: Grant) -> str:
    scope = " and ".join(str(t) for t in grant.matching) or "every call"
    signed = " (signed)" if grant.verified else ""
    return f"{grant.grant_id}: {grant.tool} ({scope}) by {grant.by}{signed}"


def format_pending(pending: PendingApproval) -> str:
    """One waiting call: what it would do, who may decide it, until when."""
    what = pending.for_approver()
    notes = []
    if pending.deadline:
        notes.append(f"deadline {pending.deadline:%Y-%m-%d %H:%M:%S}Z")
    if pending.approvers is not None:
        notes.append(f"approvers: {', '.join(pending.approvers)}")
    if pending.escalated_to:
        notes.append(f"escalated to {', '.join(pending.escalated_to)}")
    if pending.rule:
        notes.append(f"asked by {pending.rule}")
    return f"{pending.approval_id}: {what}" + (f" ({'; '.join(notes)})" if notes else "")


def status_line(status: SessionStatus) -> str:
    """The live status: what the session is doing right now."""
    phase = _PHASES.get(status.phase, status.phase)
    if status.phase == "awaiting_approval":
        phase += f" ({max(status.pending_count, len(status.pending_approvals))})"
    agent = f" {status.agent}:" if status.agent else ""
    return f"[turn {status.turn}]{agent} {phase}"


def format_status(status: SessionStatus) -> str:
    usage = status.usage
    lines = [
        f"phase:          {_PHASES.get(status.phase, status.phase)}",
        f"turn:           {status.turn}",
        f"messages:       {status.message_count} (+{status.queued_messages} queued)",
        f"runs:           {status.runs}",
    ]
    if status.version is not None:
        move = ", moving to the current build" if status.move_requested else ""
        lines.append(f"build:          {status.version} ({status.upgrade}{move})")
    lines += [
        f"tokens:         {usage.prompt_tokens} in, {usage.completion_tokens} out",
    ]
    for name, by in status.spend.items():  # by model, and by tool for sub-agents
        cost = f", ${by.cost_usd:.4f}" if by.cost_usd is not None else ""
        lines.append(
            f"  {name}: {by.calls} calls, {by.usage.prompt_tokens} in, "
            f"{by.usage.completion_tokens} out{cost}"
        )
    if status.agent is not None:
        stack = " > ".join(status.agent_stack) or "empty"
        lines.append(f"agent:          {status.agent} (back: {stack})")
        if status.move_pending:
            lines.append(f"move:           to {status.move_pending} (next checkpoint)")
    if status.budget is not None:
        budget = status.budget
        spent = [f"{budget.total_tokens} tokens"]
        if budget.max_total_tokens:
            spent[0] += f" of {budget.max_total_tokens}"
        if budget.cost_usd is not None:
            cost = f"${budget.cost_usd:.4f}"
            spent.append(cost + (f" of ${budget.max_cost_usd:.4f}" if budget.max_cost_usd else ""))
        lines.append(f"budget:         {', '.join(spent)}")
    if status.compacted:
        lines.append(f"compacted:      {status.compacted} messages no longer sent")
    if status.trimmed:
        left_out = f"{status.trimmed} old messages left out of the last request (context)"
        lines.append(f"trimmed:        {left_out}")
    for words in status.files_left_out:
        lines.append(f"file left out:  {words}")
    if status.waiting_for_capacity:
        shared = status.waiting_for_capacity
        lines.append(f"waiting:        for capacity on {shared} (shared limit)")
    if status.cancel_pending:
        lines.append("cancel:         pending (next checkpoint)")
    if status.flushes_pending:
        lines.append(f"flush:          {status.flushes_pending} pending (after this turn)")
    for wake_up in status.wake_ups:
        lines.append(f"wake-up:        {describe(wake_up)}")
    if status.last_error:
        lines.append(f"last error:     {status.last_error}")
    for pending in status.pending_approvals:
        lines.append(f"pending:        {format_pending(pending)}")
    unlisted = status.pending_count - len(status.pending_approvals)
    if unlisted > 0:
        lines.append(f"pending:        {unlisted} more (SessionHandle.pending_approvals reads all)")
    for grant in status.grants:
        lines.append(f"grant:          {format_grant(grant)}")
    for rejected in status.rejected_signals:
        lines.append(f"rejected:       {rejected}")
    return "\n".join(lines)


def message_json(message: Message) -> str:
    return json.dumps(message.model_dump(mode="json", exclude_none=True), ensure_ascii=False)


# The CLI's output stream: session text (a model's, a tool's, a sender's) reaches the
# terminal with its control and bidirectional characters shown as escapes, so it cannot
# move the cursor, recolour, retitle or reorder what a person reads. Newlines and tabs
# stay as they are; JSON output stays valid (an escape is a JSON escape).

class VisibleWriter(io.TextIOBase):
    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, text: str) -> int:
        self._out.write(visible(text, keep="\n\t"))
        return len(text)

    def control(self, sequence: str) -> None:
        """The CLI's own control sequence (a status line's rewrite), written as it is."""
        self._out.write(sequence)

    def flush(self) -> None:
        self._out.flush()

    def isatty(self) -> bool:
        return self._out.isatty()


# The message log (``JSONLMessageLog``): one message a line with its
# context: the session, the conversation turn (user messages so far), the iteration
# within it (model calls since that message), the agent, the message's index, and the
# workflow run it landed in when that is known (lines followed live).
#
# Lines come from the session's own array (the ``messages`` query and the live
# ``message_appended`` events, both read from workflow state), so the log is complete and
# a retried model or tool call never writes a line twice.

class MessageLog:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.count = 0
        self._turn = 0
        self._iteration = 0

    def line(self, message: Message, run: int | None = None) -> str:
        """The next message's line (messages must come in array order)."""
        if isinstance(message, UserMessage):
            self._turn += 1
            self._iteration = 0
        elif isinstance(message, AssistantMessage):
            self._iteration += 1
        context: dict[str, Any] = {
            "session": self.session_id,
            "turn": self._turn,
            "iteration": self._iteration,
            "index": self.count,
        }
        if message.agent_name:
            context["agent"] = message.agent_name
        if run is not None:
            context["run"] = run
        context["message"] = message.model_dump(mode="json", exclude_none=True)
        self.count += 1
        return json.dumps(context, ensure_ascii=False)
