"""Shared provider limits under load: how much of the allowed rate sessions use, what a
provider refuses, what the check costs a call under the limit, and how two tenants
share an endpoint.

    ./run bench-limits [--rate 80] [--window 20] [--sessions 400]

Two ``durable-agent worker`` processes share one limited endpoint against a fresh dev
server; the scripted model answers over real HTTP and refuses (429) whatever goes past
its own limit, which is the one the workers' capabilities file gives.

- **Throughput**: ``--sessions`` one-call sessions from two tenants (alice starts four
  for each of bob's), all started at once. Used: requests the provider accepted, over
  what its limit allowed from the first request to the last (a full window at the
  start, then ``rate`` per window). Refused: 429s, all and after the first window.
- **Fairness**: each tenant's share of the requests made while both had calls waiting
  (after the first window, until either tenant was done).
- **Added latency**: 40 one-call sessions, one after another, with and without a limit
  (far above the load), alternating three times: the difference per call (calls take
  their worker's spare lease); and what one ask of the limiter costs a call that has
  no spare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.run import ROOT, dev_server
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.capacity import LedgerState
from durable_agent._spec.document import AgentSpec
from durable_agent._spec.endpoints import (
    LIMITER_WORKFLOW,
    CapacityAnswer,
    CapacityRequest,
    ProviderLimits,
    limiter_id,
)
from durable_agent.testing import ScriptedProvider
from durable_agent.testing._models import RateLimitedModel

CALLS = 40


def start_workers(address: str, queue: str, caps: Path, count: int) -> list[subprocess.Popen[str]]:
    workers = []
    for _ in range(count):
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "durable_agent._cli.main",
                "worker",
                "--task-queue",
                queue,
                "--capabilities",
                str(caps),
                "--transcript-store",
                "memory:",
                "--log-level",
                os.environ.get("BENCH_LOG_LEVEL", "error"),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "TEMPORAL_ADDRESS": address},
        )
        assert worker.stdout is not None and "worker ready" in worker.stdout.readline()
        workers.append(worker)
    return workers


def spec(endpoint: str, **session: Any) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "model": {
                "name": "bench-model",
                "endpoint": endpoint,
                "max_attempts": 3,
                "stream": False,
            },
            "session": session,
        }
    )


async def throughput(agents: AgentClient, model: RateLimitedModel, sessions: int) -> dict[str, Any]:
    owners = ["bob" if k % 5 == 4 else "alice" for k in range(sessions)]
    ids = await asyncio.gather(
        *(
            agents.start(spec("limited", end_after_reply=True), f"{o} {k}", owner=o)
            for k, o in enumerate(owners)
        )
    )
    results = await asyncio.gather(*(agents.session(s).result() for s in ids))
    assert all(r.status == "done" for r in results), [r.error for r in results]
    times = [t for t, _ in model.accepted]
    first, last = times[0], times[-1]
    allowed = model.requests * (1 + (last - first) / model.window)
    warm = [t for t in model.refused if t > first + model.window]
    bobs = [k for k, (_, o) in enumerate(model.accepted) if o == "bob"]
    alices = [k for k, (_, o) in enumerate(model.accepted) if o == "alice"]
    # while both wait: after the first window's burst, until either tenant is done
    end = model.accepted[min(bobs[-1], alices[-1])][0]
    both = [(t, o) for t, o in model.accepted if first + model.window < t <= end]
    shares = Counter(o for _, o in both)
    return {
        "requests": len(times),
        "seconds": last - first,
        "used": len(times) / allowed,
        "refused": len(model.refused),
        "refused_after_warmup": len(warm),
        "alice_share": shares["alice"] / len(both),
        "bob_share": shares["bob"] / len(both),
    }


async def per_call_ms(agents: AgentClient, endpoint: str) -> float:
    """One-call sessions, one after another (each waited for by its result's long
    poll): ms per session."""
    started = time.perf_counter()
    for k in range(CALLS):
        session = await agents.start(spec(endpoint, end_after_reply=True), f"alice {k}")
        assert (await agents.session(session).result()).status == "done"
    return (time.perf_counter() - started) / CALLS * 1000


async def ask_round_trip_ms(client: Client, queue: str) -> float:
    """What a call without a spare lease pays: one ask of a limiter with capacity (a
    fresh one, on the workers' queue), median of 50 after 5 to warm up."""
    limits = ProviderLimits(requests_per_minute=10**6)
    handle = client.get_workflow_handle(limiter_id("probe", limits))
    await client.start_workflow(
        LIMITER_WORKFLOW,
        args=["probe", LedgerState(limits=limits, lease_prefix="probe")],
        id=limiter_id("probe", limits),
        task_queue=queue,
    )
    took = []
    for k in range(55):
        ask = CapacityRequest(limits=limits, session_id=f"probe-{k}", run_id="", hold_seconds=60)
        started = time.perf_counter()
        await handle.execute_update("acquire", [ask], result_type=list[CapacityAnswer])
        took.append((time.perf_counter() - started) * 1000)
    return statistics.median(took[5:])


async def main(rate: int, window: float, sessions: int) -> None:
    model = RateLimitedModel(rate, window)
    async with dev_server() as (address, client):
        with ScriptedProvider(responder=model) as provider:
            endpoint = {"base_url": provider.base_url, "api_key_env": None}
            caps = Path(tempfile.mkdtemp(prefix="bench-limits-")) / "capabilities.json"
            caps.write_text(
                json.dumps(
                    {
                        "models": {"limited": endpoint, "roomy": endpoint, "open": endpoint},
                        "limits": {
                            "limited": {"requests_per_minute": rate, "window_seconds": window},
                            "roomy": {"requests_per_minute": 1_000_000},
                        },
                    }
                )
            )
            queue = f"bench-limits-{uuid.uuid4().hex[:6]}"
            workers = start_workers(address, queue, caps, 2)
            try:
                agents = AgentClient(client, task_queue=queue)
                figures = await throughput(agents, model, sessions)
                model.requests = 10**9  # the latency runs are never limited by the model
                limited, open_ = [], []
                for _ in range(3):
                    limited.append(await per_call_ms(agents, "roomy"))
                    open_.append(await per_call_ms(agents, "open"))
                round_trip = await ask_round_trip_ms(client, queue)
            finally:
                for worker in workers:
                    worker.kill()
                    worker.wait(30)
    cpu = platform.processor() or platform.machine()
    print(
        f"# bench-limits {date.today()} on {os.cpu_count()} cores ({cpu}), "
        f"Python {platform.python_version()}, 2 worker processes"
    )
    print(f"limit: {rate} requests per {window:g} s (margin 1 s), {sessions} sessions")
    print("| requests | seconds | allowed rate used | 429s | 429s after warm-up |")
    print("|---:|---:|---:|---:|---:|")
    print(
        f"| {figures['requests']} | {figures['seconds']:.1f} | {figures['used']:.1%} "
        f"| {figures['refused']} | {figures['refused_after_warmup']} |"
    )
    print(
        f"fairness while both wait: alice (4/5 of the sessions) "
        f"{figures['alice_share']:.0%}, bob (1/5) {figures['bob_share']:.0%}"
    )
    a, b = statistics.median(limited), statistics.median(open_)
    print(
        f"per one-call session ({CALLS} in a row): limited {a:.1f} ms, not limited "
        f"{b:.1f} ms, added {a - b:+.1f} ms (runs: {_ms(limited)} / {_ms(open_)})"
    )
    print(f"an ask of the limiter (a call without a spare lease): {round_trip:.1f} ms median")


def _ms(values: list[float]) -> str:
    return ", ".join(f"{v:.1f}" for v in values)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=80)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--sessions", type=int, default=400)
    args = parser.parse_args()
    asyncio.run(main(args.rate, args.window, args.sessions))
