"""``durable-agent eval CASES.jsonl``: run a dataset as a durable evaluation, print its
table and write its HTML report (beside another run's, with ``--compare``)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from durable_agent._agents._modules import load_agents
from durable_agent._client._client import AgentClient
from durable_agent._client._types import SpecError, parse_spec
from durable_agent._contracts._eval_cases import EvalCase, EvalReport, read_cases
from durable_agent._spec._spec import AgentSpec
from durable_agent._wire._messages import Message
from durable_agent.testing._eval_report import report_html, report_table

from ._args import CommandError
from ._specs import add_agent_arguments, load_spec

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
