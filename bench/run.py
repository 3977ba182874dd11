"""The benchmark: durable-agent against the floor (a minimal hand-written loop that sends
the whole array on every model call), same scripted provider over real HTTP with zero
latency, same real Temporal dev server, each worker in its own process.

    ./run bench [--runs 5] [--concurrent 50] [--rounds 5] [--peers]

Workload C runs a third time on durable-agent with live deltas off (``ours-deltas-off``):
the floor publishes nothing while a model streams, so that row compares the same work,
and the default's shows what streaming the text to readers costs.

With ``--peers``, the same workloads on the OpenAI Agents SDK with Temporal's plugin and
on Pydantic AI's Temporal integration (bench/peer_kinds.py), in a second table.

Prints a Markdown table; every figure of ours is also shown as a ratio to the floor.

With ``BENCH_PROFILE=PREFIX``, each worker of ours and the floor's is profiled, every
thread of it, one file for each kind and workload: ``PREFIX.<kind>.<workload>.prof``
(``warm-up``, ``A``, ``B`` and ``C``, C's rounds added up); ``python -m bench.profile``
prints one (bench/profile.py). Profiling slows every kind, so its figures are not the
bench's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.floor import FloorInput
from bench.paired import describe, turn_order
from bench.peer_kinds import PEERS, peers_python, worker_command
from bench.peer_table import peer_table
from bench.workloads import A, B, Workload, bench_model, tool_definitions
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.boundary import AgentResult
from durable_agent._spec.document import AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent.temporal._local import free_port, temporal_binary
from durable_agent.temporal._process import exit_without_teardown
from durable_agent.temporal._worker import DEV_SERVER_SETTINGS
from durable_agent.testing import ScriptedProvider

ROOT = Path(__file__).parent.parent
TICKS = os.sysconf("SC_CLK_TCK")
PROMPT = "Work through the rounds."
#: durable-agent with live deltas off: workload C only.
QUIET = "ours-deltas-off"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


@dataclass
class Figures:
    ms_per_turn: float = 0.0
    workflow_tasks: int = 0
    events: int = 0
    history_bytes: int = 0
    history_json_bytes: int = 0
    worker_cpu_per_run: float = 0.0
    b_call_bytes: dict[int, int] = field(default_factory=dict)
    b_total_bytes: int = 0
    b_total_json_bytes: int = 0
    c_turns_per_second: float = 0.0
    c_p50: float = 0.0
    c_p95: float = 0.0
    c_worker_cpu: float = 0.0
    c_server_cpu: float = 0.0
    c_rounds: list[tuple[float, float]] = field(default_factory=list)
    """Each round of C: (turns/s, worker CPU s)."""
    a_runs: list[tuple[float, float]] = field(default_factory=list)
    """Each run of A: (ms per turn, worker CPU s)."""


class Bench:
    def __init__(self, address: str, client: Client, provider: ScriptedProvider) -> None:
        self.address = address
        self.client = client
        self.endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        self.base_url = provider.base_url

    async def session(self, kind: str, workload: Workload, task_queue: str) -> tuple[str, float]:
        """Run one session to its end; return its id and wall seconds."""
        wid = f"{kind}-{workload.model}-{uuid.uuid4().hex[:8]}"
        start = time.perf_counter()
        if kind in ("ours", QUIET):
            spec = AgentSpec(
                model=ModelSpec(name=workload.model, endpoint=self.endpoint),
                tools=[{"name": workload.tool}],
                stop={"max_turns": workload.model_calls + 1},
                session={"end_after_reply": True, "live_deltas": kind == "ours"},
            )
            # as users start sessions (the client titles it in the start's memo)
            agents = AgentClient(self.client, task_queue=task_queue)
            await agents.start(spec, PROMPT, session_id=wid)
            handle = self.client.get_workflow_handle(wid, result_type=AgentResult)
            result = await handle.result()
            assert result.status == "done" and result.turns == workload.model_calls, result
        elif kind in PEERS:
            request = {
                "model": workload.model,
                "tool": workload.tool,
                "prompt": PROMPT,
                "max_turns": workload.model_calls + 1,
            }
            peer = await self.client.start_workflow(
                PEERS[kind].workflow, request, id=wid, task_queue=task_queue, result_type=str
            )
            answer = await peer.result()
            assert answer == f"finished {workload.rounds} rounds", answer
        else:
            handle = await self.client.start_workflow(
                "FloorWorkflow",
                FloorInput(
                    endpoint=self.endpoint,
                    model=workload.model,
                    tools=tool_definitions(workload),
                    prompt=PROMPT,
                ),
                id=wid,
                task_queue=task_queue,
                result_type=int,
            )
            await handle.result()
        return wid, time.perf_counter() - start

    async def history_figures(self, workflow_id: str) -> tuple[int, int, int, int]:
        """(bytes as Temporal counts them, bytes of `temporal workflow show --output json`,
        events, workflow tasks)."""
        described = await self.client.get_workflow_handle(workflow_id).describe()
        counted = described.raw_description.workflow_execution_info.history_size_bytes
        shown = subprocess.run(
            [
                temporal_binary(),
                "workflow",
                "show",
                "--workflow-id",
                workflow_id,
                "--output",
                "json",
                "--address",
                self.address,
            ],
            capture_output=True,
            check=True,
        ).stdout
        events = json.loads(shown)["events"]
        tasks = sum(1 for e in events if e["eventType"].endswith("WORKFLOW_TASK_COMPLETED"))
        return counted, len(shown), len(events), tasks

    async def model_call_bytes(self, workflow_id: str) -> list[int]:
        """Bytes each model call adds to history: its input plus its result."""
        history = await self.client.get_workflow_handle(workflow_id).fetch_history()
        scheduled: dict[int, int] = {}
        sizes: list[int] = []
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                started = event.activity_task_scheduled_event_attributes
                if "model" in started.activity_type.name.lower():  # ours, the floor's, a peer's
                    scheduled[event.event_id] = started.input.ByteSize()
            elif event.HasField("activity_task_completed_event_attributes"):
                completed = event.activity_task_completed_event_attributes
                if completed.scheduled_event_id in scheduled:
                    sizes.append(
                        scheduled[completed.scheduled_event_id] + completed.result.ByteSize()
                    )
        return sizes


#: Workers being profiled, by pid: each takes ``mark LABEL`` lines on its stdin.
_profiled: dict[int, subprocess.Popen[str]] = {}


async def mark(pid: int, label: str) -> None:
    """Close the profile section ``label`` of a profiled worker (else nothing)."""
    worker = _profiled.get(pid)
    if worker is None:
        return
    assert worker.stdin is not None and worker.stdout is not None
    worker.stdin.write(f"mark {label}\n")
    worker.stdin.flush()
    answer = await asyncio.to_thread(worker.stdout.readline)
    assert answer.strip() == "marked", answer


@asynccontextmanager
async def worker_for(kind: str, bench: Bench, data: Path) -> AsyncIterator[tuple[str, int]]:
    """The kind's worker in a process of its own: its task queue and pid."""
    task_queue = f"bench-{kind}-{uuid.uuid4().hex[:6]}"
    command = [
        sys.executable,
        "-m",
        "bench.worker_process",
        "ours" if kind == QUIET else kind,
        bench.address,
        task_queue,
        str(data / kind),
    ]
    env = {**os.environ, "BENCH_PEER_BASE_URL": bench.base_url}
    profile = env.pop("BENCH_PROFILE", None)
    if kind in PEERS:
        command = worker_command(PEERS[kind], bench.address, task_queue, bench.base_url)
    elif profile:
        env["BENCH_PROFILE"] = f"{profile}.{kind}"
    worker = subprocess.Popen(
        command,
        cwd=ROOT,
        stdin=subprocess.PIPE if "BENCH_PROFILE" in env else None,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    if "BENCH_PROFILE" in env:
        _profiled[worker.pid] = worker
    try:
        await bench.session(kind, A, task_queue)  # warm-up
        await mark(worker.pid, "warm-up")
        yield task_queue, worker.pid
    finally:
        _profiled.pop(worker.pid, None)
        worker.terminate()
        worker.wait(timeout=30)


async def measure_a(
    kinds: list[str], bench: Bench, workers: dict[str, tuple[str, int]], runs: int
) -> dict[str, Figures]:
    """Workload A, one session at a time, the kinds taking turns in each run (in reverse
    order every other run, as C's rounds do): a shared machine's drift then counts
    against none of them. A run's CPU is its worker's during that session alone."""
    figures = {k: Figures() for k in kinds}
    last: dict[str, str] = {}
    for r in range(runs):
        for kind in turn_order(kinds, r):
            task_queue, pid = workers[kind]
            cpu_before = cpu_seconds(pid)
            last[kind], wall = await bench.session(kind, A, task_queue)
            cpu = cpu_seconds(pid) - cpu_before
            figures[kind].a_runs.append((wall / A.model_calls * 1000, cpu))
    for kind in kinds:
        found = figures[kind]
        await mark(workers[kind][1], "A")
        found.worker_cpu_per_run = sum(cpu for _, cpu in found.a_runs) / runs
        found.ms_per_turn = statistics.median(ms for ms, _ in found.a_runs)
        (
            found.history_bytes,
            found.history_json_bytes,
            found.events,
            found.workflow_tasks,
        ) = await bench.history_figures(last[kind])
    return figures


async def measure_b(kind: str, bench: Bench, task_queue: str, pid: int, figures: Figures) -> None:
    """Workload B: one session of 200 model calls."""
    b_id, _ = await bench.session(kind, B, task_queue)
    await mark(pid, "B")
    sizes = await bench.model_call_bytes(b_id)
    figures.b_call_bytes = {k: sizes[k - 1] for k in (1, 10, 50, 100, 200)}
    figures.b_total_bytes, figures.b_total_json_bytes, *_ = await bench.history_figures(b_id)


async def measure_c(kind: str, bench: Bench, task_queue: str, pid: int, concurrent: int) -> Figures:
    """Workload C: ``concurrent`` sessions at once on the kind's worker."""
    figures = Figures()
    server_pid = int(os.environ["BENCH_SERVER_PID"])
    worker_cpu, server_cpu = cpu_seconds(pid), cpu_seconds(server_pid)
    start = time.perf_counter()
    done = await asyncio.gather(*(bench.session(kind, A, task_queue) for _ in range(concurrent)))
    wall = time.perf_counter() - start
    latencies = sorted(w for _, w in done)
    figures.c_turns_per_second = concurrent * A.model_calls / wall
    figures.c_p50 = statistics.median(latencies)
    figures.c_p95 = latencies[int(0.95 * (len(latencies) - 1))]
    figures.c_worker_cpu = cpu_seconds(pid) - worker_cpu
    figures.c_server_cpu = cpu_seconds(server_pid) - server_cpu
    await mark(pid, "C")
    return figures


C_FIELDS = ("c_turns_per_second", "c_p50", "c_p95", "c_worker_cpu", "c_server_cpu")


async def measure_all(
    kinds: list[str], bench: Bench, data: Path, runs: int, concurrent: int, rounds: int
) -> dict[str, Figures]:
    """A's runs, the kinds taking turns; B for each kind; then C in ``rounds`` rounds,
    the kinds taking turns within each, in reverse order every other round (a shared
    machine's speed drifts over minutes, and would otherwise count against whichever
    kind ran last), each C figure the median of its rounds."""
    async with AsyncExitStack() as stack:
        workers = {k: await stack.enter_async_context(worker_for(k, bench, data)) for k in kinds}
        figures = {QUIET: Figures()}
        figures |= await measure_a([k for k in kinds if k != QUIET], bench, workers, runs)
        for kind in kinds:
            if kind != QUIET:
                await measure_b(kind, bench, *workers[kind], figures[kind])
        c_runs: dict[str, list[Figures]] = {k: [] for k in kinds}
        for r in range(rounds):
            for kind in turn_order(kinds, r):
                c_runs[kind].append(await measure_c(kind, bench, *workers[kind], concurrent))
    for kind in kinds:
        for name in C_FIELDS:
            setattr(figures[kind], name, statistics.median(getattr(f, name) for f in c_runs[kind]))
        figures[kind].c_rounds = [(f.c_turns_per_second, f.c_worker_cpu) for f in c_runs[kind]]
    return figures


def table(
    floor: Figures, ours: Figures, quiet: Figures, runs: int, concurrent: int, rounds: int
) -> str:
    rows: list[tuple[str, str, float, float, str]] = [
        ("A", f"ms per turn (median of {runs})", floor.ms_per_turn, ours.ms_per_turn, "<= 1.1x"),
        ("A", "workflow tasks per run", floor.workflow_tasks, ours.workflow_tasks, ""),
        ("A", "history events per run", floor.events, ours.events, ""),
        ("A", "history bytes per run", floor.history_bytes, ours.history_bytes, "<= 0.5x"),
        (
            "A",
            "... as `temporal workflow show` JSON",
            floor.history_json_bytes,
            ours.history_json_bytes,
            "",
        ),
        ("A", "worker CPU s per run", floor.worker_cpu_per_run, ours.worker_cpu_per_run, "<= 1.2x"),
    ]
    for k in (1, 10, 50, 100, 200):
        rows.append(
            ("B", f"bytes of model call {k}", floor.b_call_bytes[k], ours.b_call_bytes[k], "")
        )
    rows += [
        ("B", "history bytes, 200 calls", floor.b_total_bytes, ours.b_total_bytes, "<= 0.1x"),
        (
            "B",
            "... as `temporal workflow show` JSON",
            floor.b_total_json_bytes,
            ours.b_total_json_bytes,
            "",
        ),
        (
            "C",
            f"turns/s, {concurrent} sessions (median of {rounds})",
            floor.c_turns_per_second,
            ours.c_turns_per_second,
            ">= 1.0x",
        ),
        ("C", "p50 session latency s", floor.c_p50, ours.c_p50, ""),
        ("C", "p95 session latency s", floor.c_p95, ours.c_p95, ""),
        ("C", "worker CPU s", floor.c_worker_cpu, ours.c_worker_cpu, "<= 1.0x"),
        ("C", "server CPU s", floor.c_server_cpu, ours.c_server_cpu, ""),
        (
            "C",
            "turns/s, live deltas off",
            floor.c_turns_per_second,
            quiet.c_turns_per_second,
            ">= 1.0x",
        ),
        ("C", "worker CPU s, live deltas off", floor.c_worker_cpu, quiet.c_worker_cpu, "<= 1.0x"),
        ("C", "server CPU s, live deltas off", floor.c_server_cpu, quiet.c_server_cpu, ""),
    ]

    def show(value: float) -> str:
        return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"

    lines = [
        "| workload | figure | floor | durable-agent | ratio | target |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for workload, name, base, value, target in rows:
        ratio = f"{value / base:.2f}x" if base else "-"
        lines.append(f"| {workload} | {name} | {show(base)} | {show(value)} | {ratio} | {target} |")
    flat = ours.b_call_bytes[200] / ours.b_call_bytes[10]
    a_paired = list(zip(floor.a_runs, ours.a_runs, strict=True))
    a_ms = [o[0] / f[0] for f, o in a_paired]
    a_cpu = [o[1] / f[1] for f, o in a_paired]
    lines.append("")
    lines.append(  # A's runs alternate too: the same spread, run by run
        "Workload A run by run, durable-agent to the floor: ms per turn "
        + " ".join(f"{r:.2f}x" for r in a_ms)
        + "; worker CPU "
        + " ".join(f"{r:.2f}x" for r in a_cpu)
        + ". Medians of the runs' ratios: "
        + describe("ms per turn", a_ms, "lower")
        + "; "
        + describe("worker CPU", a_cpu, "lower")
        + "."
    )
    for label, kind in (("durable-agent", ours), ("with live deltas off", quiet)):
        paired = list(zip(floor.c_rounds, kind.c_rounds, strict=True))
        throughput = [o[0] / f[0] for f, o in paired]
        cpu = [o[1] / f[1] for f, o in paired]
        lines.append("")
        lines.append(  # the spread the medians hide: a shared machine's speed drifts
            f"Workload C round by round, {label}, to the floor: throughput "
            + " ".join(f"{r:.2f}x" for r in throughput)
            + "; worker CPU "
            + " ".join(f"{r:.2f}x" for r in cpu)
            + ". Medians of the rounds' ratios: "
            + describe("throughput", throughput, "higher")
            + "; "
            + describe("worker CPU", cpu, "lower")
            + "."
        )
    lines.append("")
    lines.append(
        f"Workload B, durable-agent: call 200 is {flat:.2f}x call 10 (target <= 1.5x); "
        f"total {ours.b_total_bytes / 1e6:.2f} MB (target < 2 MB)."
    )
    return "\n".join(lines)


@asynccontextmanager
async def dev_server(settings: tuple[str, ...] = ()) -> AsyncIterator[tuple[str, Client]]:
    """A fresh dev server of its own (its pid in ``BENCH_SERVER_PID``): address, client.
    ``settings``: more arguments for it (the same for every kind measured)."""
    port = free_port()
    server = subprocess.Popen(
        [
            temporal_binary(),
            "server",
            "start-dev",
            "--headless",
            "--port",
            str(port),
            "--ui-port",
            str(free_port()),
            "--log-level",
            "error",
            *settings,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ["BENCH_SERVER_PID"] = str(server.pid)
    address = f"127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                client = await Client.connect(address, data_converter=pydantic_data_converter)
                break
            except RuntimeError:
                await asyncio.sleep(0.2)
        yield address, client
    finally:
        server.terminate()
        server.wait(timeout=30)


async def main(
    runs: int, concurrent: int, rounds: int, peers: bool, settings: tuple[str, ...]
) -> None:
    data = Path(tempfile.mkdtemp(prefix="durable-agent-bench-"))
    if peers:
        peers_python()  # installed before anything is measured
    kinds = ["floor", "ours", QUIET, *(PEERS if peers else ())]
    async with dev_server(settings) as (address, client):
        with ScriptedProvider(responder=bench_model) as provider:
            bench = Bench(address, client, provider)
            figures = await measure_all(kinds, bench, data, runs, concurrent, rounds)
        print(
            table(figures["floor"], figures["ours"], figures[QUIET], runs, concurrent, rounds),
            flush=True,
        )
        if peers:
            others = {k: figures[k] for k in PEERS}
            print(
                "\n" + peer_table({"durable-agent": figures["ours"], **others}, runs, concurrent),
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="durable-agent against the floor")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--concurrent", type=int, default=50)
    parser.add_argument(
        "--rounds", type=int, default=5, help="rounds of C, the kinds taking turns in each"
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also the OpenAI Agents SDK and Pydantic AI on Temporal (installed on first use)",
    )
    parser.add_argument(
        "--embedded-server",
        action="store_true",
        help="the dev server as `durable-agent dev` runs it (DEV_SERVER_SETTINGS), for every "
        "kind alike; by default the dev server as it ships, the recipe of earlier figures",
    )
    args = parser.parse_args()
    settings = DEV_SERVER_SETTINGS if args.embedded_server else ()
    asyncio.run(main(args.runs, args.concurrent, args.rounds, args.peers, settings))
    exit_without_teardown(0)
