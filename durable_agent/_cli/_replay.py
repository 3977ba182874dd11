"""``durable-agent replay SOURCE... --spec FILE``: rerun recorded conversations against
today's agent code, with the model's recorded replies wherever the request is
unchanged and the recorded tool results (no tool runs, and a call a person denied
stays denied; ``--run-tools`` runs today's tools, never a denied call); exit 1 when any
run departs from its recording (a CI gate for agent changes). A source is a session
id, a JSON file of messages (``history --json``), or a folder of them."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from durable_agent._client._client import AgentClient
from durable_agent._wire._messages import Message, parse_messages
from durable_agent.capabilities import load_capabilities

from ._args import CommandError, server_settings
from ._specs import add_agent_arguments, load_spec

# The rerun's worker and the gate's replayer bring the whole worker side: imported by
# these commands only, so every other command starts without them.


def add_replay_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    sub = command("replay", "rerun recorded conversations against today's agent code")
    sub.add_argument("sources", nargs="+", help="session ids, JSON files, or folders of them")
    sub.add_argument("--spec", help="agent spec JSON file (default: model from environment)")
    add_agent_arguments(sub)
    sub.add_argument("--tool", action="append", default=[], help="tool for the default spec")
    sub.add_argument("--instructions", help="system prompt for the default spec")
    sub.add_argument("--tools", default="", help="comma-separated modules of today's tools")
    sub.add_argument("--capabilities", help="what the rerun's worker lets the spec use")
    sub.add_argument(
        "--live",
        action="store_true",
        help="where a run departs, ask the spec's own model (else the turn ends there)",
    )
    sub.add_argument(
        "--run-tools",
        action="store_true",
        help="run today's tools instead of answering calls from the recording (a call a "
        "person denied in the recording is still denied)",
    )


async def cmd_replay(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    from durable_agent.temporal._worker import load_tool_modules
    from durable_agent.testing import rerun

    registry = load_tool_modules([m for m in args.tools.split(",") if m])
    spec = load_spec(args)
    capabilities = load_capabilities(Path(args.capabilities)) if args.capabilities else None
    departed = 0
    recordings = await _recordings(agents, args.sources)
    for name, recorded in recordings:
        try:
            report = await rerun(
                agents.temporal,
                recorded,
                spec,
                registry=registry,
                capabilities=capabilities,
                live=args.live,
                run_tools=args.run_tools,
            )
        except ValueError as error:
            raise CommandError(f"{name}: {error}") from None
        departed += not report.same
        print(f"{name}: {report.summary()}", file=out)
        for index, tool, was, now in report.changed_calls():
            print(f"  message {index}: {tool} was called with {was}, now {now}", file=out)
    print(f"{departed} of {len(recordings)} recordings depart", file=out)
    return 1 if departed else 0


async def _recordings(agents: AgentClient, sources: list[str]) -> list[tuple[str, list[Message]]]:
    found: list[tuple[str, list[Message]]] = []
    for source in sources:
        path = Path(source)
        files = sorted(path.glob("*.json")) if path.is_dir() else [path] if path.exists() else []
        if not files and path.exists():
            raise CommandError(f"{source}: no .json recordings in it")
        for file in files:
            try:
                found.append((str(file), parse_messages(file.read_text())))
            except ValueError as error:
                raise CommandError(f"{file}: not a recorded array: {error}") from None
        if not path.exists():  # a session id
            found.append((source, await agents.session(source).messages()))
    return found


def add_check_replay_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    sub = command("check-replay", "replay histories against this code before a deploy")
    sub.add_argument("paths", nargs="*", help="recorded histories: JSON files or folders")
    sub.add_argument("--running", action="store_true", help="the sessions running on --task-queue")
    sub.add_argument("--sample", type=int, help="with --running: only the newest N")


async def cmd_check_replay(args: argparse.Namespace, out: TextIO) -> int:
    from durable_agent.temporal._replay_gate import (
        check_histories,
        recorded_histories,
        running_histories,
    )

    histories = recorded_histories([Path(p) for p in args.paths])
    if args.running:
        agents = await AgentClient.connect(server_settings(args), task_queue=args.task_queue)
        running = running_histories(agents.temporal, args.task_queue, args.sample)
        histories += [found async for found in running]
    if not histories:
        raise CommandError("nothing to replay: give history files or folders, or --running")
    verdicts = await check_histories(histories)
    for verdict in verdicts:
        if verdict.failure is None:
            print(f"{verdict.source}: replays", file=out)
        else:
            print(
                f"{verdict.source}: DIVERGES\n  {verdict.failure}\n  {verdict.explanation}",
                file=out,
            )
    failed = sum(v.failure is not None for v in verdicts)
    print(f"{len(verdicts) - failed} of {len(verdicts)} histories replay", file=out)
    return 1 if failed else 0
