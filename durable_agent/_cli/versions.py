"""``durable-agent versions``: sessions by the worker build running them; make a build
current; move sessions to it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TextIO

from durable_agent._client.sessions import AgentClient
from durable_agent._connection import DEFAULT_DEPLOYMENT

from .args import CommandError

ACTIONS = ("list", "current", "move")


def add_versions_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    sub = command("versions", "sessions by worker build; make a build current; move sessions")
    sub.add_argument("action", nargs="?", choices=ACTIONS, default="list")
    sub.add_argument(
        "targets",
        nargs="*",
        help="current: the build (BUILD_ID or DEPLOYMENT:BUILD_ID); move: session ids",
    )
    sub.add_argument("--deployment", default=DEFAULT_DEPLOYMENT, help="the worker deployment")
    sub.add_argument("--from", dest="source", help="move: every running session on this build")


async def cmd_versions(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    if args.action == "current":
        if len(args.targets) != 1:
            raise CommandError("versions current: name one build (BUILD_ID or DEPLOYMENT:BUILD_ID)")
        target = (
            args.targets[0] if ":" in args.targets[0] else f"{args.deployment}:{args.targets[0]}"
        )
        try:
            woken = await agents.versions.make_current(target)
        except ValueError as error:
            raise CommandError(str(error)) from None
        print(f"{target} is current: new sessions start on it", file=out)
        print(f"{woken} sessions and limiters on other builds were told", file=out)
        return 0
    if args.action == "move":
        if bool(args.targets) == bool(args.source):
            raise CommandError("versions move: name sessions, or a build with --from (not both)")
        moving = list(args.targets)
        if args.source:
            moving = await agents.versions.move(_named(args.source, args.deployment))
        else:
            for session_id in moving:
                await agents.session(session_id).move_to_current()
        print(f"{len(moving)} sessions move at their next turn boundary", file=out)
        for session_id in moving:
            print(f"  {session_id}", file=out)
        return 0
    current = await agents.versions.current(args.deployment)
    print(f"current build of {args.deployment}: {current or 'none'}", file=out)
    for version, sessions in sorted((await agents.versions.list()).items()):
        mark = " (current)" if version == current else ""
        print(f"{version or 'unversioned'}{mark}: {len(sessions)} running", file=out)
        for session in sessions:
            print(f"  {session.session_id}  {session.title}", file=out)
    return 0


def _named(build: str, deployment: str) -> str:
    """A build id of ``--deployment``, or a whole ``DEPLOYMENT:BUILD_ID``."""
    return build if ":" in build else f"{deployment}:{build}"
