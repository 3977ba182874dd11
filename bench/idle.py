"""Many idle sessions on one worker with a small workflow cache: the worker's memory per
open session, and how long a session's next reply takes once its state was evicted.

    ./run bench-idle [--sessions 1000] [--cache 100] [--probes 200]

The worker runs in its own process (its resident memory read from ``/proc``) against a
fresh dev server; the scripted model answers at once over real HTTP. Every session gets
one reply and then waits for its next message (idle, open). Then ``--probes`` sessions,
picked at random among those the cache no longer holds, each get a message; the figure
is the time from sending it to its reply, which includes replaying the session's
history on a worker that had evicted it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import date
from pathlib import Path

from bench.run import ROOT, dev_server
from durable_agent._client.sessions import AgentClient
from durable_agent._spec.document import AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest


def reply(request: RecordedRequest) -> AssistantMessage:
    return assistant_text(f"reply {len(request.body['messages'])}")


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def main(sessions: int, cache: int, probes: int) -> None:
    data = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    async with dev_server() as (address, client):
        queue = f"bench-idle-{uuid.uuid4().hex[:6]}"
        worker = subprocess.Popen(
            [sys.executable, "-m", "bench.worker_process", "ours", address, queue, str(data)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "BENCH_MAX_CACHED": str(cache)},
        )
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        try:
            with ScriptedProvider(responder=reply) as provider:
                endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
                spec = AgentSpec(model=ModelSpec(name="idle", endpoint=endpoint, stream=False))
                agents = AgentClient(client, task_queue=queue)
                warm = await agents.start(spec, "warm up")
                await agents.session(warm).wait(after=0, timeout=60)
                before = resident_mb(worker.pid)
                places = asyncio.Semaphore(50)

                async def open_one(k: int) -> str:
                    async with places:
                        session = await agents.start(spec, f"hello {k}")
                        await agents.session(session).wait(after=0, timeout=120)
                        return session

                started = time.perf_counter()
                opened = await asyncio.gather(*(open_one(k) for k in range(sessions)))
                open_seconds = time.perf_counter() - started
                await asyncio.sleep(2)  # let the worker settle
                after = resident_mb(worker.pid)
                # the cache keeps the most recently used: the earliest were evicted
                evicted = opened[: max(0, sessions - cache)] or opened
                picked = random.Random(7).sample(evicted, min(probes, len(evicted)))
                latencies = []
                for session in picked:
                    sent = time.perf_counter()
                    await agents.session(session).send("and now?")
                    await agents.session(session).wait(after=2, timeout=120)
                    latencies.append((time.perf_counter() - sent) * 1000)
                await asyncio.gather(*(agents.session(s).end() for s in [warm, *opened]))
        finally:
            worker.terminate()
            worker.wait(timeout=30)
    print(f"Idle sessions, {date.today()}, {platform.machine()}, {os.cpu_count()} cores")
    print(f"sessions opened (one reply each)  {sessions} in {open_seconds:.1f} s")
    print(f"workflow cache                    {cache}")
    print(f"worker memory before / after      {before:.0f} MB / {after:.0f} MB")
    print(f"memory per open session           {(after - before) * 1024 / sessions:.1f} KB")
    print(
        f"next reply after eviction (ms)    p50 {statistics.median(latencies):.0f}, "
        f"p99 {percentile(latencies, 0.99):.0f} ({len(latencies)} sessions)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--cache", type=int, default=100)
    parser.add_argument("--probes", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.cache, args.probes))
