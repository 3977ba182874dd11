"""``durable-agent fork`` and ``diff``, and the session list as a tree of branches."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TextIO

from durable_agent._client.results import SessionSummary
from durable_agent._client.sessions import AgentClient
from durable_agent._wire.messages import visible
from durable_agent._wire.transcript import message_line

from .args import CommandError, add_agent_arguments, load_spec


def add_branch_commands(command: Callable[..., argparse.ArgumentParser]) -> None:
    fork = command("fork", "start a session from the first messages of another")
    fork.add_argument("session_id")
    fork.add_argument("--at", type=int, required=True, help="messages of it the branch keeps")
    fork.add_argument("--spec", help="agent spec JSON file (default: model from environment)")
    add_agent_arguments(fork)
    fork.add_argument("--tool", action="append", default=[], help="tool for the default spec")
    fork.add_argument("--instructions", help="system prompt for the default spec")
    fork.add_argument("--message", help="a message after the kept ones")
    fork.add_argument("--new-session-id", help="the branch's id (default: generated)")
    diff = command("diff", "where two sessions' conversations part, and what each says after")
    diff.add_argument("left")
    diff.add_argument("right")


async def cmd_fork(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    try:
        branch = await agents.session(args.session_id).fork(
            args.at,
            load_spec(args),
            args.message,
            new_session_id=args.new_session_id,
        )
    except ValueError as error:
        raise CommandError(str(error)) from None
    print(branch, file=out)
    return 0


async def cmd_diff(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    found = await agents.diff(args.left, args.right)
    print(f"{found.common} messages in common", file=out)
    for sign, name, messages in (("-", args.left, found.left), ("+", args.right, found.right)):
        print(f"{sign * 3} {name} ({len(messages)} after them)", file=out)
        for offset, message in enumerate(messages):
            print(f"{sign} [{found.common + offset}] {visible(message_line(message))}", file=out)
    return 0


def session_lines(found: Sequence[SessionSummary]) -> list[str]:
    """The listing, branches under the session they come from (indented, with the
    message they branch at); a branch whose parent is not listed stands alone."""
    listed = {s.session_id for s in found}
    children: dict[str, list[SessionSummary]] = {}
    for summary in found:
        if summary.forked_from in listed:
            children.setdefault(summary.forked_from or "", []).append(summary)
    lines = [f"{'SESSION':<40} {'STATUS':<12} {'STARTED':<19} TITLE"]

    def add(summary: SessionSummary, depth: int) -> None:
        started = f"{summary.started_at:%Y-%m-%d %H:%M:%S}" if summary.started_at else "-"
        name = "  " * depth + ("└ " if depth else "") + summary.session_id
        title = summary.title
        if summary.forked_from is not None:
            title = f"(from {summary.forked_from} at {summary.forked_at}) {title}"
        lines.append(f"{name:<40} {summary.status:<12} {started:<19} {title}")
        for child in children.get(summary.session_id, []):
            add(child, depth + 1)

    for summary in found:
        if summary.forked_from not in listed:
            add(summary, 0)
    return lines
