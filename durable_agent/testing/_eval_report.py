"""An evaluation's report, for people: a table for the terminal and one HTML page (per
case: its scores with their reasons, its tool calls, its transcript, tokens, cost and
time), each beside another run's scores when one is given for comparison. Pure."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

from durable_agent._contracts.evals import CaseReport, EvalReport
from durable_agent._wire.messages import Message


def _mean(case: CaseReport | None) -> str:
    mean = case.mean if case is not None else None
    return "-" if mean is None else f"{mean:.2f}"


def _totals(report: EvalReport) -> str:
    scored = [c.mean for c in report.cases if c.mean is not None]
    mean = f"{sum(scored) / len(scored):.2f}" if scored else "-"
    cost = f", ${report.cost_usd:.4f}" if report.cost_usd is not None else ""
    counts = {s: sum(c.status == s for c in report.cases) for s in ("scored", "failed", "skipped")}
    return (
        f"{report.eval_id}: mean {mean} over {counts['scored']} scored, {counts['failed']} "
        f"failed, {counts['skipped']} skipped; {report.tokens} tokens{cost}"
    )


def report_table(report: EvalReport, against: EvalReport | None = None) -> list[str]:
    """One line a case: its mean score (and the other run's), then each score."""
    theirs = {c.id: c for c in against.cases} if against is not None else {}
    head = f"{'CASE':<24} {'STATUS':<8} {'SCORE':>5}"
    lines = [head + (f" {'WAS':>5}" if against else "") + "  SCORES"]
    for case in report.cases:
        row = f"{case.id:<24} {case.status:<8} {_mean(case):>5}"
        if against is not None:
            row += f" {_mean(theirs.get(case.id)):>5}"
        detail = ", ".join(f"{s.name} {s.score:.2f}" for s in case.scores) or (case.error or "")
        lines.append(f"{row}  {detail}")
    lines.append(_totals(report))
    if against is not None:
        lines.append("against " + _totals(against))
    return lines


def report_html(
    report: EvalReport,
    transcripts: Mapping[str, Sequence[Message]],
    against: EvalReport | None = None,
) -> str:
    """The whole report as one self-contained page (no script, no outside resource)."""
    theirs = {c.id: c for c in against.cases} if against is not None else {}
    rows, details = [], []
    for case in report.cases:
        was = f"<td>{_mean(theirs.get(case.id))}</td>" if against is not None else ""
        rows.append(
            f'<tr class="{case.status}"><td><a href="#case-{_e(case.id)}">{_e(case.id)}</a></td>'
            f"<td>{case.status}</td><td class='score'>{_mean(case)}</td>{was}"
            f"<td>{case.tokens}</td><td>{_cost(case)}</td><td>{case.duration_ms} ms</td></tr>"
        )
        details.append(_case_section(case, transcripts.get(case.id, ())))
    compare = f"<th>was ({_e(against.eval_id)})</th>" if against is not None else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(report.eval_id)}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: 4px 8px; }}
tr.failed td, tr.skipped td {{ color: #a33; }} .score {{ font-weight: bold; }}
section {{ margin-top: 2em; border-top: 1px solid #ddd; }}
.message {{ white-space: pre-wrap; margin: 4px 0; }} .role {{ font-weight: bold; }}
</style></head><body>
<h1>Evaluation {_e(report.eval_id)}</h1>
<p id="totals">{_e(_totals(report))}</p>
{f'<p id="against">against {_e(_totals(against))}</p>' if against is not None else ""}
<table id="cases"><thead><tr><th>case</th><th>status</th><th>score</th>{compare}
<th>tokens</th><th>cost</th><th>time</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
{"".join(details)}
</body></html>
"""


def _case_section(case: CaseReport, transcript: Sequence[Message]) -> str:
    scores = "".join(
        f"<li><b>{_e(s.name)}</b> {s.score:.2f}: {_e(s.reason)}</li>" for s in case.scores
    )
    calls = "".join(
        f"<li><code>{_e(name)}({_e(str(args))})</code></li>" for name, args in case.tool_calls
    )
    said = "".join(
        f'<div class="message"><span class="role">{_e(m.role)}</span> '
        f"{_e(m.content if isinstance(m.content, str) else '[parts]')}</div>"
        for m in transcript
    )
    error = f"<p class='error'>{_e(case.error)}</p>" if case.error else ""
    return (
        f'<section id="case-{_e(case.id)}"><h2>{_e(case.id)}</h2>{error}'
        f"<h3>Scores</h3><ul>{scores}</ul><h3>Tool calls</h3><ul>{calls}</ul>"
        f"<h3>Transcript</h3>{said}</section>"
    )


def _cost(case: CaseReport) -> str:
    return f"${case.cost_usd:.4f}" if case.cost_usd is not None else "-"


def _e(text: str) -> str:
    return html.escape(text, quote=True)
