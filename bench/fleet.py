"""Several worker processes on one task queue, sharing one PostgreSQL transcript store:
throughput with 1, 2 and 4 workers, then the same sessions while workers are killed
at random (SIGKILL, a fresh one started in its place), each session's array compared
with its undisturbed twin.

    ./run bench-fleet [--sessions 1000] [--kill-every 3]

Each session is workload C: three model calls, two rounds of two parallel tool calls,
the scripted model answering at once over real HTTP. On a 2-core machine the workers,
the dev server and PostgreSQL share the cores, so more workers do not add throughput
here; the figure shows what the coordination costs and that nothing is lost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from temporalio.client import Client

from bench.run import PROMPT, ROOT, dev_server
from bench.workloads import C, bench_model
from durable_agent._client.results import NoWorkerError
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.boundary import WORKFLOW_NAME, AgentResult
from durable_agent._spec.document import AgentInput, AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent.testing import ScriptedProvider
from tests.support.arrays import without_times
from tests.support.postgres_server import running_postgres


@dataclass
class Fleet:
    """Worker processes on one queue; ``kill`` replaces one with a fresh process."""

    address: str
    queue: str
    store_url: str
    data: Path
    workers: list[subprocess.Popen[str]] = field(default_factory=list)

    def start(self) -> None:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.worker_process",
                "ours",
                self.address,
                self.queue,
                str(self.data),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "BENCH_STORE_URL": self.store_url},
        )
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        self.workers.append(worker)

    def kill(self, rng: random.Random) -> None:
        victim = self.workers.pop(rng.randrange(len(self.workers)))
        victim.kill()
        victim.wait()
        self.start()

    def stop(self) -> None:
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


@dataclass
class Run:
    arrays: dict[int, str]
    seconds: float
    kills: int
    unanswered: list[str]
    """Sessions whose read got no worker's answer within 120 s (then read again)."""


async def run_sessions(
    client: Client,
    fleet: Fleet,
    spec: AgentSpec,
    sessions: int,
    tag: str,
    kill_every: float | None = None,
    seed: int = 0,
) -> Run:
    """``sessions`` sessions, 50 in flight at a time; the arrays by session number."""
    # reading a finished session replays it on a worker, which may be busy for a while
    agents = AgentClient(client, task_queue=fleet.queue, query_timeout=120)
    places = asyncio.Semaphore(50)
    finished = asyncio.Event()
    kills = 0
    unanswered: list[str] = []

    async def one(k: int) -> tuple[int, str]:
        async with places:
            session = f"{tag}-{k}"  # started as bench.run does: no wait for a worker's answer
            handle = await client.start_workflow(
                WORKFLOW_NAME,
                AgentInput(spec=spec, message=f"{PROMPT} #{k}"),
                id=session,
                task_queue=fleet.queue,
                result_type=AgentResult,
            )
            result = await handle.result()
            assert result.status == "done", (session, result.error)
            for _ in range(5):
                try:
                    return k, json.dumps(without_times(await agents.session(session).messages()))
                except NoWorkerError:  # counted and printed: a read no worker answered
                    unanswered.append(session)
            raise RuntimeError(f"{session}: no worker answered five reads")

    async def killer() -> None:
        nonlocal kills
        rng = random.Random(seed)
        while kill_every is not None and not finished.is_set():
            try:
                await asyncio.wait_for(finished.wait(), kill_every)
            except TimeoutError:
                await asyncio.to_thread(fleet.kill, rng)
                kills += 1

    started = time.perf_counter()
    chaos = asyncio.create_task(killer())
    try:
        done = await asyncio.gather(*(one(k) for k in range(sessions)))
    finally:
        finished.set()
        await chaos
    return Run(dict(done), time.perf_counter() - started, kills, unanswered)


async def main(sessions: int, kill_every: float) -> None:
    rows: list[tuple[int, Run]] = []
    data = Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    with running_postgres() as store_url, ScriptedProvider(responder=bench_model) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        spec = AgentSpec(
            model=ModelSpec(name=C.model, endpoint=endpoint),
            tools=[{"name": C.tool}],
            session={"end_after_reply": True},
        )
        async with dev_server() as (address, client):
            for count in (1, 2, 4):
                fleet = Fleet(address, f"fleet-{uuid.uuid4().hex[:6]}", store_url, data)
                try:
                    for _ in range(count):
                        fleet.start()
                    rows.append(
                        (count, await run_sessions(client, fleet, spec, sessions, f"w{count}"))
                    )
                finally:
                    fleet.stop()
            fleet = Fleet(address, f"fleet-{uuid.uuid4().hex[:6]}", store_url, data)
            try:
                for _ in range(4):
                    fleet.start()
                wild = await run_sessions(
                    client, fleet, spec, sessions, "wild", kill_every=kill_every, seed=7
                )
            finally:
                fleet.stop()
    calm = rows[0][1].arrays
    twins = sum(1 for k, array in wild.arrays.items() if array == calm[k])
    turns = sessions * C.model_calls
    print(
        f"Many workers, {date.today()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"{sessions} sessions of workload C, one PostgreSQL store"
    )
    print(f"{'workers':<28}{'seconds':>9}{'sessions/s':>12}{'turns/s':>9}")
    for count, run in [*rows, (4, wild)]:
        label = f"{count}" + (f", {run.kills} killed" if run.kills else "")
        print(
            f"{label:<28}{run.seconds:>9.1f}{sessions / run.seconds:>12.1f}"
            f"{turns / run.seconds:>9.1f}"
        )
    print(f"identical to the undisturbed run: {twins} of {sessions} sessions")
    for count, run in [*rows, (4, wild)]:
        if run.unanswered:
            print(
                f"{count} workers: {len(run.unanswered)} reads unanswered within 120 s "
                f"(read again): {', '.join(run.unanswered[:5])}"
            )
    if twins != sessions:
        raise SystemExit("a session under kills differs from its undisturbed twin")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--kill-every", type=float, default=3.0)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.kill_every))
