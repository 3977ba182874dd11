"""``durable-agent schedule``: agents on Temporal Schedules (create, list, runs, pause,
unpause, trigger, backfill, delete)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TextIO

from durable_agent._client.schedules import OVERLAPS
from durable_agent._client.sessions import AgentClient

from .args import CommandError, add_agent_arguments, load_spec
from .branches import session_lines

ACTIONS = ("create", "list", "runs", "pause", "unpause", "trigger", "backfill", "delete")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_schedule_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    sub = command("schedule", "start an agent on a schedule; list, pause, trigger, backfill")
    sub.add_argument("action", choices=ACTIONS)
    sub.add_argument("name", nargs="?", help="the schedule (all but list)")
    sub.add_argument("--spec", help="agent spec JSON file (default: model from environment)")
    add_agent_arguments(sub)
    sub.add_argument("--tool", action="append", default=[], help="tool for the default spec")
    sub.add_argument("--instructions", help="system prompt for the default spec")
    sub.add_argument("--message", help="create: what each run is asked")
    sub.add_argument("--cron", action="append", default=[], help="create: a cron expression")
    sub.add_argument("--every", type=duration, help="create: an interval (90s, 15m, 1h, 1d)")
    sub.add_argument("--overlap", choices=sorted(OVERLAPS), default="skip")
    sub.add_argument("--paused", action="store_true", help="create: paused")
    sub.add_argument("--note", help="pause, unpause: why")
    sub.add_argument("--start", type=datetime.fromisoformat, help="backfill: from (ISO time)")
    sub.add_argument("--end", type=datetime.fromisoformat, help="backfill: to (ISO time)")


def duration(text: str) -> timedelta:
    """A command line's ``90s``, ``15m``, ``1h`` or ``1d`` (the schedule and wake-up
    commands read their intervals with it)."""
    unit = _UNITS.get(text[-1:])
    try:
        amount = float(text[:-1]) if unit else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not a duration (90s, 15m, 1h)") from None
    if amount <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive duration")
    return timedelta(seconds=amount * (unit or 1))


async def cmd_schedule(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    if args.action == "list":
        for found in await agents.schedules.list():
            state = "paused" if found.paused else "active"
            after = ", ".join(f"{t:%Y-%m-%d %H:%M:%S}" for t in found.next_runs) or "-"
            print(f"{found.name:<30} {state:<7} next: {after}  {found.note}", file=out)
        return 0
    if not args.name:
        raise CommandError(f"schedule {args.action}: name the schedule")
    name = args.name
    try:
        if args.action == "create":
            if not args.message:
                raise CommandError("schedule create: give --message (what each run is asked)")
            await agents.schedules.create(
                name,
                load_spec(args),
                args.message,
                cron=args.cron,
                every=args.every,
                overlap=args.overlap,
                paused=args.paused,
            )
            print(f"schedule {name} created", file=out)
        elif args.action == "runs":
            for line in session_lines(await agents.schedules.runs(name)):
                print(line, file=out)
        elif args.action == "pause":
            await agents.schedules.pause(name, args.note)
        elif args.action == "unpause":
            await agents.schedules.unpause(name, args.note)
        elif args.action == "trigger":
            await agents.schedules.trigger(name)
        elif args.action == "backfill":
            if args.start is None or args.end is None:
                raise CommandError("schedule backfill: give --start and --end")
            await agents.schedules.backfill(name, args.start, args.end, args.overlap)
        else:
            await agents.schedules.delete(name)
    except ValueError as error:
        raise CommandError(str(error)) from None
    return 0
