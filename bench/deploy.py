"""A rolling deploy under load: sessions in flight (slow tools and slow streamed model
replies), every worker replaced one at a time with SIGTERM while the others run, as a
service manager does.

    ./run bench-deploy [--sessions 8] [--turns 3] [--workers 2] [--drain-seconds 120]

First the same sessions run undisturbed (the reference), then again while each worker
is replaced: a new worker starts, and once it is ready the old one gets SIGTERM. It
prints the calls run twice (a tool's ledger), the model requests sent twice (the
provider's log of requests, by session and turn), the latency each session gained
over the reference (p50, p95), and how long each stopped worker took to exit.
``--drain-seconds 0`` is a worker that gives its calls up at once (temporalio's
default), for the figures before.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from datetime import date
from pathlib import Path

from bench.run import ROOT, dev_server
from durable_agent import AgentClient, ModelSpec
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import (
    RecordedRequest,
    Reply,
    chat_stream_events,
    sse_reply,
)

REPLY_CHUNKS, CHUNK_SECONDS = 15, 0.2  # a streamed reply of about 3 s


def answer(request: RecordedRequest) -> AssistantMessage | Reply:
    """Each turn: the model calls the slow tool, then streams a slow answer."""
    messages = request.body["messages"]
    if messages[-1]["role"] == "user":
        return assistant_calls(("rebuild_index", {"name": f"i{len(messages)}"}))
    events = chat_stream_events(assistant_text(" ".join(["done"] * REPLY_CHUNKS)))
    return sse_reply(events, delay=CHUNK_SECONDS)


def _figure(log: str, name: str) -> int:
    """A count a stopping worker logged (``in_flight=2``), 0 if it logged none."""
    found = re.findall(rf"{name}=(\d+)", log)
    return int(found[-1]) if found else 0


def request_key(request: RecordedRequest) -> tuple[str, int]:
    """Which session and which point of it a request is (the same twice: sent twice)."""
    messages = request.body["messages"]
    first = next(m for m in messages if m["role"] == "user")
    return str(first["content"]), len(messages)


class Workers:
    """``durable-agent worker`` processes on one queue, logs in ``folder``."""

    def __init__(self, address: str, queue: str, folder: Path, drain: float) -> None:
        self.address, self.queue, self.folder, self.drain = address, queue, folder, drain
        self.count = 0

    async def start(self, capabilities: Path) -> asyncio.subprocess.Process:
        self.count += 1
        log = self.folder / f"worker-{self.count}.log"
        with log.open("w") as out:
            process = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "durable_agent._cli.main", "worker"),
                *("--address", self.address, "--task-queue", self.queue),
                *("--tools", "bench.deploy_tools", "--capabilities", str(capabilities)),
                *("--data-dir", str(self.folder / f"data-{self.count}")),
                *("--drain-seconds", str(self.drain), "--log-level", "info"),
                cwd=ROOT,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
            )
        while "worker ready" not in log.read_text():
            if process.returncode is not None:
                raise RuntimeError(f"a worker did not start: {log.read_text()[-2000:]}")
            await asyncio.sleep(0.1)
        return process


async def run_sessions(
    agents: AgentClient, spec: AgentSpec, label: str, count: int, turns: int
) -> list[float]:
    """``count`` sessions of ``turns`` turns each, side by side: each one's seconds."""

    async def one(k: int) -> float:
        started = time.monotonic()
        session = agents.session(await agents.start(spec, f"{label} session {k}: turn 1"))
        await session.wait(after=0, timeout=600)
        for turn in range(2, turns + 1):
            cursor = await session.send(f"turn {turn}")
            await session.wait(after=cursor, timeout=600)
        await session.end(by="bench")
        return time.monotonic() - started

    return list(await asyncio.gather(*(one(k) for k in range(count))))


async def main(sessions: int, turns: int, workers: int, drain: float) -> None:
    with tempfile.TemporaryDirectory() as folder, ScriptedProvider(responder=answer) as provider:
        here = Path(folder)
        ledger = here / "ledger.txt"
        os.environ["BENCH_DEPLOY_LEDGER"] = str(ledger)
        capabilities = here / "capabilities.toml"
        capabilities.write_text(
            f'[models.scripted]\nbase_url = "{provider.base_url}"\napi_key_env = ""\n'
        )
        spec = AgentSpec(model=ModelSpec(name="m", endpoint="scripted"), tools=["rebuild_index"])
        async with dev_server() as (address, client):
            pool = Workers(address, "deploy", here, drain)
            running = [await pool.start(capabilities) for _ in range(workers)]
            agents = AgentClient(client, task_queue="deploy")
            reference = await run_sessions(agents, spec, "calm", sessions, turns)
            calm_requests = len(provider.requests)
            ledger.write_text("")
            exits: list[float] = []
            in_flight: list[int] = []
            handed: list[int] = []

            async def roll() -> None:
                await asyncio.sleep(4)  # sessions in flight: tools and replies running
                for k in range(workers):
                    running.append(await pool.start(capabilities))
                    old = running[k]
                    stopped = time.monotonic()
                    old.send_signal(signal.SIGTERM)
                    await old.wait()
                    exits.append(time.monotonic() - stopped)
                    said = (here / f"worker-{k + 1}.log").read_text()
                    in_flight.append(_figure(said, "in_flight"))
                    handed.append(_figure(said, "handed_over"))
                    await asyncio.sleep(2)

            _, deployed = await asyncio.gather(
                roll(), run_sessions(agents, spec, "deploy", sessions, turns)
            )
            for process in running[workers:]:
                process.send_signal(signal.SIGTERM)
                await process.wait()
        ledger_lines = ledger.read_text().splitlines()
    starts = Counter(line.split()[1] for line in ledger_lines if line.startswith("start"))
    rerun = sum(n - 1 for n in starts.values())
    keys = Counter(request_key(r) for r in provider.requests[calm_requests:])
    twice = sum(n - 1 for n in keys.values())
    added = sorted(d - statistics.median(reference) for d in deployed)
    print(
        f"# A rolling deploy: {workers} workers replaced one at a time under {sessions} "
        f"sessions of {turns} turns (drain {drain:g} s; {date.today()}, "
        f"{platform.machine()}, {os.cpu_count()} cores)"
    )
    print(f"tool calls: {len(starts)}, run again: {rerun}")
    print(f"model requests: {sum(keys.values())}, sent twice: {twice}")
    p95 = added[min(len(added) - 1, int(0.95 * len(added)))]
    print(f"added latency per session: p50 {statistics.median(added):.1f} s, p95 {p95:.1f} s")
    print("worker exits after SIGTERM: " + ", ".join(f"{e:.1f} s" for e in exits))
    print(f"calls in flight at each SIGTERM: {in_flight}; handed over: {handed}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--drain-seconds", type=float, default=120.0)
    arguments = parser.parse_args()
    asyncio.run(
        main(arguments.sessions, arguments.turns, arguments.workers, arguments.drain_seconds)
    )
