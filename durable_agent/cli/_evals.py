"""``durable-agent eval CASES.jsonl``: run a dataset as a durable evaluation, print its
table and write its HTML report (beside another run's, with ``--compare``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from durable_agent.client import AgentClient, SpecError, parse_spec
from durable_agent.core import (
    AgentSpec,
    EvalCase,
    EvalReport,
    Message,
    read_cases,
    report_html,
    report_table,
)

from ._args import CommandError
from ._specs import add_agent_arguments, load_spec


def add_eval_command(command: Callable[..., argparse.ArgumentParser]) -> None:
    sub = command("eval", "run a dataset of cases against an agent, as durable work")
    sub.add_argument("cases", help="JSONL: one case a line (id, input, expected, ...)")
    sub.add_argument("--spec", help="agent spec JSON file (default: model from environment)")
    add_agent_arguments(sub)
    sub.add_argument("--tool", action="append", default=[], help="tool for the default spec")
    sub.add_argument("--instructions", help="system prompt for the default spec")
    sub.add_argument("--judge-spec", help="spec JSON file of the model judge (for criteria)")
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
            judge=_judge(args.judge_spec),
            eval_id=args.eval_id,
        )
        print(f"evaluation {eval_id} started", file=out, flush=True)
    report = await agents.evals.report(eval_id, wait=True)
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


def _judge(path: str | None) -> AgentSpec | None:
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
