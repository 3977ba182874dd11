"""Following a session on a terminal: the model's text as it streams, tools as they
run, approvals as they are asked, every other message as it lands."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TextIO

from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.approvals import PendingApproval
from durable_agent._contracts.events import Gap, LiveEvent, MessageAppended
from durable_agent._wire.messages import AssistantMessage, Message

from .args import who_am_i
from .render import MessageLog, format_message, format_pending, status_line

Approver = Callable[[PendingApproval], Awaitable[tuple[bool, str | None]]]
#: The width of a message's label (``assistant``), so streamed text lines up.
LABEL = "{:<9} "


def write_control(stream: TextIO, sequence: str) -> None:
    """A terminal control sequence of the CLI's own, past the escaping of session text
    (``VisibleWriter.control``) when the stream has it."""
    control = getattr(stream, "control", None)
    if control is not None:
        control(sequence)
    else:
        stream.write(sequence)


class StatusLine:
    """One self-rewriting line on a terminal; silent when output is not a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._live = stream.isatty()
        self._shown = False

    def show(self, text: str) -> None:
        if self._live:  # our own control sequence, then the (escaped) text
            write_control(self._stream, "\r\x1b[2K")
            self._stream.write(text)
            self._stream.flush()
            self._shown = True

    def clear(self) -> None:
        if self._shown:
            write_control(self._stream, "\r\x1b[2K")
            self._stream.flush()
            self._shown = False


class StreamedText:
    """The reply being written, as its deltas arrive."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self.open = False

    def write(self, text: str, agent: str | None) -> None:
        if not self.open:
            self.open = True
            who = f"[{agent}] " if agent else ""
            self._out.write(LABEL.format("assistant") + who)
        self._out.write(text)
        self._out.flush()

    def void(self, reason: str) -> None:
        """The attempt that wrote it was lost: say so, and start again."""
        if self.open:
            self._out.write(f"\n  ({reason}; the text above is replaced)\n")
            self._out.flush()
        self.open = False

    def close(self, message: Message) -> None:
        """The whole reply landed: end the line, then what streaming did not show."""
        self.open = False
        self._out.write("\n")
        if isinstance(message, AssistantMessage) and (message.tool_calls or message.is_error):
            rest = message.model_copy(update={"content": ""})
            self._out.write(format_message(rest) + "\n")
        self._out.flush()


async def follow(
    agents: AgentClient,
    session_id: str,
    *,
    after: int,
    before: int,
    approver: Approver | None,
    out: TextIO,
) -> str:
    """Print the session's events after offset ``after`` until it answers beyond message
    ``before`` (``reply``) or ends (``ended``). Approvals go to ``approver``; without
    one, they wait for someone else."""
    line, text = StatusLine(out), StreamedText(out)
    agent: str | None = None
    turn = 0
    async for event in agents.session(session_id).follow(after=after):
        if event.type == "model_started":
            agent, turn = event.agent, event.turn
            text.void("the model call started again")
            line.show(f"[turn {turn}]{f' {agent}:' if agent else ''} calling model")
        elif event.type == "text_delta":
            line.clear()
            text.write(event.text, agent)
        elif event.type == "attempt_restarted":
            text.void(event.reason)
        elif event.type == "message_appended":
            line.clear()
            message = (
                event.message
                or (await agents.session(session_id).messages(event.index, limit=1))[0]
            )
            if text.open and isinstance(message, AssistantMessage):
                text.close(message)
            else:
                print(format_message(message), file=out, flush=True)
        elif event.type == "tool_started":
            line.show(f"[turn {event.turn}]{f' {agent}:' if agent else ''} running {event.name}")
        elif event.type == "approval_requested":
            line.show(status_line(await agents.session(session_id).status()))
            await _ask(agents, session_id, event, approver, out, line)
        elif event.type == "idle" and event.message_count > before:
            line.clear()
            return "reply"
        elif event.type == "ended":
            line.clear()
            return "ended"
    return "ended"


async def _ask(
    agents: AgentClient,
    session_id: str,
    event: LiveEvent,
    approver: Approver | None,
    out: TextIO,
    line: StatusLine,
) -> None:
    assert event.type == "approval_requested"
    pending = event.approval
    line.clear()
    if approver is None:
        print(
            f"awaiting approval {format_pending(pending)}\n"
            f"  decide with: durable-agent approve {session_id} {pending.approval_id}",
            file=out,
            flush=True,
        )
        return
    approved, reason = await approver(pending)
    session = agents.session(session_id)
    decide = session.approve if approved else session.deny
    await decide(pending.approval_id, by=who_am_i(), reason=reason)


async def write_message_log(
    agents: AgentClient, session_id: str, out: TextIO, *, follow: bool
) -> None:
    """The session's message log, one message a line with its context; with ``follow``,
    new lines as messages land until the session ends."""
    log = MessageLog(session_id)
    after = await agents.session(session_id).latest_offset() if follow else -1
    for message in await agents.session(session_id).messages():
        print(log.line(message), file=out, flush=True)
    if not follow:
        return
    async for event in agents.session(session_id).follow(after=after):
        if isinstance(event, MessageAppended) and event.index >= log.count:
            missing = (
                await agents.session(session_id).messages(log.count)
                if (event.message is None or event.index > log.count)
                else [event.message]
            )
            for message in missing:
                print(log.line(message, event.run), file=out, flush=True)
        elif isinstance(event, Gap):
            for message in await agents.session(session_id).messages(log.count):
                print(log.line(message), file=out, flush=True)
