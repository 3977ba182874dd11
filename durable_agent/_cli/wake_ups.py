"""``durable-agent wake-ups``: a session's wake-ups from the command line (list, set,
cancel), as a starter sets them from Python (``SessionHandle.wake_up``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime
from typing import TextIO

from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.wake_ups import describe
from durable_agent._errors import WakeUpRefused
from durable_agent._spec.tool_kinds import zone

from .args import CommandError
from .schedules import duration

ACTIONS = ("list", "set", "cancel")


def add_wake_ups_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    sub = command("wake-ups", "a session's wake-ups: list, set (at, after, every, cron), cancel")
    sub.add_argument("action", choices=ACTIONS)
    sub.add_argument("session_id")
    sub.add_argument("wake_up_id", nargs="?", help="cancel: the wake-up (w1, w2, ...)")
    sub.add_argument("--text", help="set: what the agent reads when it wakes")
    sub.add_argument("--at", type=datetime.fromisoformat, help="set: an ISO time with offset")
    sub.add_argument("--after", type=duration, help="set: a delay (90s, 15m, 1h, 1d)")
    sub.add_argument("--every", type=duration, help="set: repeat at this interval")
    sub.add_argument("--cron", help="set: repeat on a five-field cron rule")
    sub.add_argument("--timezone", default="UTC", help="set: IANA zone of --cron and --at")


async def cmd_wake_ups(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    session = agents.session(args.session_id)
    try:
        if args.action == "list":
            found = await session.wake_ups()
            for wake_up in found:
                print(describe(wake_up), file=out)
            if not found:
                print("no wake-ups", file=out)
        elif args.action == "cancel":
            if not args.wake_up_id:
                raise CommandError("wake-ups cancel: name the wake-up (see wake-ups list)")
            await session.cancel_wake_up(args.wake_up_id)
            print(f"wake-up {args.wake_up_id} cancelled", file=out)
        else:
            if not args.text:
                raise CommandError("wake-ups set: give --text (what the agent reads)")
            made = await session.wake_up(
                args.text,
                at=_zoned(args.at, args.timezone),
                after=args.after,
                every=args.every,
                cron=args.cron,
                timezone=args.timezone,
            )
            print(f"set {describe(made)}", file=out)
    except (WakeUpRefused, ValueError) as error:
        raise CommandError(str(error)) from None
    return 0


def _zoned(at: datetime | None, zone_name: str) -> datetime | None:
    """A time given without an offset is read in the zone given."""
    if at is None or at.tzinfo is not None:
        return at
    return at.replace(tzinfo=zone(zone_name))
