"""``durable-agent trace SESSION``: the session's timeline as text, and with ``--html
FILE`` as a picture (an HTML page with an SVG chart: one bar per model call, tool run
and approval wait)."""

from __future__ import annotations

import argparse
import contextlib
import html
from pathlib import Path
from typing import TextIO

from temporalio.api.history.v1 import HistoryEvent
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._client.results import NoWorkerError, SessionNotFoundError
from durable_agent._client.sessions import AgentClient
from durable_agent._observability.timeline import Span, Timeline, timeline_from_history
from durable_agent._wire.messages import Message

from .args import CommandError

COLOURS = {"model": "#3b6fd4", "tool": "#2e9e5b", "approval": "#d9a400"}
ROW, LABEL_WIDTH, CHART_WIDTH = 24, 260, 760


async def read_timeline(agents: AgentClient, session_id: str) -> Timeline:
    """Every run's history, walked back from the latest through continue-as-new (each
    run's start names the one before), and the array for the approvals."""
    client = agents.temporal
    histories: list[list[HistoryEvent]] = []
    run_id: str | None = None
    while True:
        try:
            history = await client.get_workflow_handle(session_id, run_id=run_id).fetch_history()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise SessionNotFoundError(session_id) from None
            raise
        events = list(history.events)
        histories.insert(0, events)
        started = events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            break
    messages: list[Message] = []
    with contextlib.suppress(NoWorkerError):  # approvals need the array; the rest is history
        messages = await agents.session(session_id).messages()
    converter = client.data_converter.payload_converter
    return timeline_from_history(session_id, histories, converter, messages)


def _cache(cached: int, written: int) -> str:
    """What of the input the provider's cache served and took, if anything."""
    parts = [f"{cached} cached"] * bool(cached) + [f"{written} written"] * bool(written)
    return f" ({', '.join(parts)})" if parts else ""


def describe(span: Span) -> str:
    if span.kind == "model":
        cache = _cache(span.cached_tokens, span.cache_write_tokens)
        tokens = f"{span.input_tokens} in{cache} / {span.output_tokens} out"
        cost = f" ${span.cost_usd:.4f}" if span.cost_usd is not None else ""
        model = f"{span.model}: " if span.model else ""
        return f"{model}{tokens}{cost}  {span.detail}".rstrip()
    return span.detail


def _seconds(spans: list[Span]) -> float:
    return sum(s.seconds for s in spans)


def render_text(timeline: Timeline) -> list[str]:
    models, tools, approvals = (timeline.of(k) for k in ("model", "tool", "approval"))
    tokens_in = sum(s.input_tokens for s in models)
    cache = _cache(sum(s.cached_tokens for s in models), sum(s.cache_write_tokens for s in models))
    tokens_out = sum(s.output_tokens for s in models)
    priced = [s.cost_usd for s in models if s.cost_usd is not None]
    cost = f", ${sum(priced):.4f}" if priced else ""
    lines = [
        f"session {timeline.session_id}: {len(models)} model calls ({_seconds(models):.2f} s, "
        f"{tokens_in} in{cache} / {tokens_out} out tokens{cost}), {len(tools)} tool runs "
        f"({_seconds(tools):.2f} s), {len(approvals)} approvals ({_seconds(approvals):.2f} s "
        "waiting for people)"
    ]
    start = timeline.start
    for span in timeline.spans:
        offset = (span.start - start).total_seconds() if start else 0.0
        name = span.label if span.kind == "model" else f"{span.kind} {span.label}"
        lines.append(
            f"  +{offset:7.2f} s  turn {span.turn:<3} {name:<28} {span.seconds:7.2f} s  "
            f"{describe(span)}".rstrip()
        )
    return lines


def render_html(timeline: Timeline) -> str:
    start, end = timeline.start, timeline.end
    total = max((end - start).total_seconds(), 0.001) if start and end else 1.0
    height = ROW * (len(timeline.spans) + 2)
    bars = []
    for row, span in enumerate(timeline.spans):
        offset = (span.start - start).total_seconds() if start else 0.0
        x = LABEL_WIDTH + offset / total * CHART_WIDTH
        width = max(span.seconds / total * CHART_WIDTH, 2.0)
        y = ROW * (row + 1)
        name = span.label if span.kind == "model" else f"{span.kind} {span.label}"
        outline = ' stroke="#b00020"' if span.error else ""
        title = html.escape(f"turn {span.turn}: {name}, {span.seconds:.3f} s. {describe(span)}")
        bars.append(
            f'<g class="{span.kind}"><title>{title}</title>'
            f'<text x="4" y="{y + 15}">turn {span.turn} · {html.escape(name)}</text>'
            f'<rect x="{x:.1f}" y="{y + 3}" width="{width:.1f}" height="{ROW - 6}" '
            f'fill="{COLOURS[span.kind]}"{outline}/>'
            f'<text x="{x + width + 4:.1f}" y="{y + 15}" class="figure">{span.seconds:.2f} s'
            f"</text></g>"
        )
    summary = html.escape(render_text(timeline)[0])
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>trace {html.escape(timeline.session_id)}</title><style>"
        "body{font:13px system-ui,sans-serif;margin:16px} text{font-size:12px}"
        " .figure{fill:#555}</style></head><body>"
        f"<h1>{html.escape(timeline.session_id)}</h1><p>{summary}</p>"
        f'<svg width="{LABEL_WIDTH + CHART_WIDTH + 80}" height="{height}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(bars)}</svg>'
        "<p>Model calls blue, tool runs green, waits for a person amber.</p></body></html>"
    )


async def cmd_trace(args: argparse.Namespace, out: TextIO, agents: AgentClient) -> int:
    timeline = await read_timeline(agents, args.session_id)
    if not timeline.spans:
        raise CommandError(f"session {args.session_id!r} has made no model call yet")
    for line in render_text(timeline):
        print(line, file=out)
    if args.html:  # a file only where asked: a read command leaves the directory as it was
        path = Path(args.html)
        path.write_text(render_html(timeline))
        print(f"picture: {path}", file=out)
    return 0
