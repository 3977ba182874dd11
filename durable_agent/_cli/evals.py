"""``durable-agent eval CASES.jsonl``: run a dataset as a durable evaluation, print its
table and write its HTML report (beside another run's, with ``--compare``); and
``durable-agent replay``: recorded conversations rerun against today's agent code, a CI
gate for agent changes."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from durable_agent._client.results import SpecError, parse_spec
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.evals import EvalCase, EvalReport, read_cases
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import Message, parse_messages
from durable_agent.capabilities import load_capabilities
from durable_agent.temporal._plugin import load_agents
from durable_agent.testing._eval_report import report_html, report_table

from .args import CommandError, add_agent_arguments, load_spec, server_settings

#: How often the command reads the evaluation's report while it runs.
PROGRESS_SECONDS = 1.0


def add_eval_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    sub = command("eval", "run a dataset of cases against an agent, as durable work")
    sub.add_argument("cases", help="JSONL: one case a line (id, input, expected, ...)")
    sub.add_argument("--spec", help="agent spec JSON file (default: model from environment)")
    add_agent_arguments(sub)
    sub.add_argument("--tool", action="append", default=[], help="tool for the default spec")
    sub.add_argument("--instructions", help="system prompt for the default spec")
    sub.add_argument("--judge-spec", help="spec JSON file of the model judge (for criteria)")
    sub.add_argument("--judge", help="the model judge: an agent of --agents' modules, by name")
    sub.add_argument(
        "--approvals",
        choices=["fail", "deny", "approve", "person"],
        default="fail",
        help="what a case's call that waits for a person gets: fail the case (default), "
        "deny or approve it as --approver, or leave it to a person",
    )
    sub.add_argument("--approver", default="eval", help="who --approvals decides as")
    sub.add_argument("--concurrency", type=int, default=4)
    sub.add_argument("--max-total-tokens", type=int)
    sub.add_argument("--max-cost-usd", type=float)
    sub.add_argument("--eval-id", help="the evaluation's id (default: generated)")
    sub.add_argument("--attach", action="store_true", help="read the run --eval-id names")
    sub.add_argument("--compare", help="another evaluation's id, to show beside this one")
    sub.add_argument("--html", help="the report's file (default: EVAL_ID.html)")


async def cmd_eval(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    if args.attach:
        if not args.eval_id:
            raise CommandError("--attach reads a run: name it with --eval-id")
        eval_id = args.eval_id
    else:
        eval_id = await agents.evals.start(
            load_spec(args),
            _cases(Path(args.cases)),
            agent=args.agent or args.spec or "",
            concurrency=args.concurrency,
            max_total_tokens=args.max_total_tokens,
            max_cost_usd=args.max_cost_usd,
            judge=_judge(args),
            eval_id=args.eval_id,
            approvals=args.approvals,
            approver=args.approver,
        )
        print(f"evaluation {eval_id} started", file=out, flush=True)
    report = await _watched(agents, eval_id, out)
    against = await agents.evals.report(args.compare) if args.compare else None
    for line in report_table(report, against):
        print(line, file=out)
    path = Path(args.html or f"{eval_id}.html")
    path.write_text(report_html(report, await _transcripts(agents, report), against))
    print(f"report: {path}", file=out)
    return 0


def _cases(path: Path) -> list[EvalCase]:
    try:
        return read_cases(path.read_text())
    except OSError as error:
        raise CommandError(f"cannot read {path}: {error.strerror}") from None
    except ValueError as error:
        raise CommandError(f"{path}: {error}") from None


async def _watched(agents: AgentClient, eval_id: str, out: TextIO) -> EvalReport:
    """The report once the evaluation is over, telling each case as it finishes and each
    that waits for a person, once."""
    told: set[str] = set()
    while True:
        report = await agents.evals.report(eval_id)
        for case in report.cases:
            if case.id not in told:
                told.add(case.id)
                mean = sum(s.score for s in case.scores) / len(case.scores) if case.scores else None
                said = f"{mean:.2f}" if mean is not None else case.error or ""
                print(f"case {case.id}: {case.status} {said}".rstrip(), file=out, flush=True)
        for case_id, tools in report.waiting.items():
            if f"waiting {case_id}" not in told:
                told.add(f"waiting {case_id}")
                print(f"case {case_id}: waits for a person ({', '.join(tools)})", file=out)
        if report.done:
            return await agents.evals.report(eval_id, wait=True)
        await asyncio.sleep(PROGRESS_SECONDS)


def _judge(args: argparse.Namespace) -> AgentSpec | None:
    if args.judge:
        named = load_agents([m for m in args.agents.split(",") if m])
        if args.judge not in named:
            listed = ", ".join(sorted(named)) or "none: load them with --agents MODULE"
            raise CommandError(f"--judge: no agent {args.judge!r} (agents: {listed})")
        return named[args.judge].spec(one_reply=True)
    path = args.judge_spec
    if path is None:
        return None
    try:
        return parse_spec(Path(path).read_text())
    except (OSError, SpecError) as error:
        raise CommandError(f"--judge-spec {path}: {error}") from None


async def _transcripts(agents: AgentClient, report: EvalReport) -> dict[str, list[Message]]:
    found = {}
    for case in report.cases:
        if case.session_id is not None:
            found[case.id] = await agents.session(case.session_id).messages()
    return found


# ``durable-agent replay SOURCE... --spec FILE``: rerun recorded conversations against
# today's agent code, with the model's recorded replies wherever the request is
# unchanged and the recorded tool results (no tool runs, and a call a person denied
# stays denied; ``--run-tools`` runs today's tools, never a denied call); exit 1 when any
# run departs from its recording (a CI gate for agent changes). A source is a session
# id, a JSON file of messages (``history --json``), or a folder of them.

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
