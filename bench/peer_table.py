"""The second table of ``./run bench --peers``: durable-agent beside its peers, the same
workloads, model, server and machine."""

from __future__ import annotations

import os
import platform
from datetime import date
from typing import Protocol

from bench.peer_kinds import PEERS, versions


class PeerFigures(Protocol):
    ms_per_turn: float
    workflow_tasks: int
    events: int
    history_bytes: int
    worker_cpu_per_run: float
    b_call_bytes: dict[int, int]
    b_total_bytes: int
    c_turns_per_second: float
    c_p50: float
    c_p95: float
    c_worker_cpu: float


def _show(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def peer_table(columns: dict[str, PeerFigures], runs: int, concurrent: int) -> str:
    names = [PEERS[k].title if k in PEERS else k for k in columns]
    rows: list[tuple[str, str, list[float]]] = [
        ("A", f"ms per turn (median of {runs})", [f.ms_per_turn for f in columns.values()]),
        ("A", "worker CPU s per run", [f.worker_cpu_per_run for f in columns.values()]),
        ("A", "history bytes per run", [f.history_bytes for f in columns.values()]),
        ("A", "history events per run", [f.events for f in columns.values()]),
        ("A", "workflow tasks per run", [f.workflow_tasks for f in columns.values()]),
        ("B", "bytes of model call 200", [f.b_call_bytes[200] for f in columns.values()]),
        ("B", "history bytes, 200 calls", [f.b_total_bytes for f in columns.values()]),
        ("C", f"turns/s, {concurrent} sessions", [f.c_turns_per_second for f in columns.values()]),
        ("C", "p50 session latency s", [f.c_p50 for f in columns.values()]),
        ("C", "p95 session latency s", [f.c_p95 for f in columns.values()]),
        ("C", "worker CPU s", [f.c_worker_cpu for f in columns.values()]),
    ]
    lines = [
        "| workload | figure | " + " | ".join(names) + " |",
        "| --- | --- |" + " ---: |" * len(names),
    ]
    lines += [
        f"| {w} | {name} | " + " | ".join(_show(v) for v in values) + " |"
        for w, name, values in rows
    ]
    lines += [
        "",
        f"{date.today().isoformat()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}; peers: {versions()}.",
    ]
    return "\n".join(lines)
