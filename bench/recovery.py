"""Recovery after SIGKILL, with the project's default settings.

A worker process is killed while it runs a tool call, or while it streams a model
reply, and a fresh one is started at once (as a supervisor would). Recovery is the
time from the kill to the call running again on the fresh worker: the tool started
again (its ledger line), or the provider asked again. Each kill lands in a new call
(the session makes one call after another); then one call is killed again and again,
where Temporal's backoff between lost attempts adds up. Several kill streams run side
by side, each with its own worker, task queue and provider.

    ./run bench-recovery [--kills 30] [--streams 3] [--repeat 6] [--heartbeat-seconds 15]

Prints p50, p95 and the worst case per kind, over ``--kills`` kills each.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from durable_agent._client.sessions import AgentClient
from durable_agent._spec.document import AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._spec.tools import ToolContext
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.temporal._local import free_port
from durable_agent.temporal._process import exit_without_teardown
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import (
    RecordedRequest,
    Reply,
    chat_stream_events,
    sse_reply,
)

ROOT = Path(__file__).parent.parent
TOOL_SECONDS = 8.0
STREAM_SECONDS = 8.0
registry = Registry()


def _note_start(key: str) -> None:
    with open(os.environ["RECOVERY_LEDGER"], "a") as ledger:
        ledger.write(f"start {key}\n")


@tool(registry=registry)
async def long_task(n: int, ctx: ToolContext) -> str:
    """A task that takes a while (kills land in the middle)."""
    await asyncio.to_thread(_note_start, ctx.idempotency_key)
    await asyncio.sleep(float(os.environ.get("RECOVERY_TOOL_SECONDS", TOOL_SECONDS)))
    return f"task {n} done"


@tool(registry=registry)
def tick(n: int) -> str:
    """Quick."""
    return f"tick {n}"


def responder(kind: str, calls: int) -> Callable[[RecordedRequest], Reply]:
    """``calls`` calls one after another: slow tool calls (``tool``), or slowly streamed
    model replies (``model``), each asking for the next; then a final answer."""

    def reply(request: RecordedRequest) -> Reply:
        done = sum(m["role"] == "tool" for m in request.body["messages"])
        if done >= calls:
            return sse_reply(chat_stream_events(assistant_text("all done")))
        if kind == "tool":
            return sse_reply(chat_stream_events(assistant_calls(("long_task", {"n": done}))))
        events = chat_stream_events(assistant_calls(("tick", {"n": done}), reasoning="hm " * 60))
        return sse_reply(events, delay=STREAM_SECONDS / len(events))

    return reply


class Worker:
    """One worker process on its own task queue; ``restart`` SIGKILLs and replaces it."""

    def __init__(
        self, address: str, task_queue: str, ledger: Path, tool_seconds: float = TOOL_SECONDS
    ) -> None:
        store = f"sqlite:///{ledger.with_suffix('.sqlite')}"  # shared by its workers
        self.args = [sys.executable, "-m", "bench.recovery", "worker", address, task_queue, store]
        self.env = {
            **os.environ,
            "RECOVERY_LEDGER": str(ledger),
            "RECOVERY_TOOL_SECONDS": str(tool_seconds),
        }
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"

    def kill_and_replace(self) -> float:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        self.process.wait()
        self.start()
        return killed

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


async def _until(check: Callable[[], bool], timeout: float = 300) -> float:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("no progress")
        await asyncio.sleep(0.05)
    return time.monotonic()


async def kill_stream(
    address: str,
    kind: str,
    stream: int,
    kills: int,
    repeat: int,
    tmp: Path,
    rng: random.Random,
    heartbeat: float,
) -> tuple[list[float], list[float]]:
    """Kill the worker once in each of ``kills`` calls, then ``repeat`` times in one
    more call; the recovery time of each kill, for the first and for the repeated."""
    queue = f"recovery-{kind}-{stream}"
    ledger = tmp / f"{queue}.ledger"
    ledger.touch()
    worker = Worker(address, queue, ledger)
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    agents = AgentClient(client, task_queue=queue)
    first: list[float] = []
    repeated: list[float] = []
    with ScriptedProvider(responder=responder(kind, kills + 1)) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        spec = AgentSpec.model_validate(
            {
                "model": ModelSpec(name="scripted", endpoint=endpoint).model_dump(),
                "tools": ["long_task"] if kind == "tool" else ["tick"],
                "session": {"end_after_reply": True, "heartbeat_timeout_seconds": heartbeat},
            }
        )

        def progress() -> int:
            if kind == "tool":
                return ledger.read_text().count("start ")
            return len(provider.requests)

        async def kill_in_call() -> float:
            await asyncio.sleep(rng.uniform(0.5, 3.0))  # somewhere in the call
            seen = progress()
            killed = await asyncio.to_thread(worker.kill_and_replace)
            recovered = await _until(lambda: progress() > seen)
            return recovered - killed

        await asyncio.to_thread(worker.start)
        try:
            session = await agents.start(spec, f"{kind} please", session_id=queue)
            last = 0
            for call in range(kills + 1):
                await _until(lambda s=last: progress() > s)  # type: ignore[misc]  # it began
                if call < kills:
                    first.append(await kill_in_call())
                else:
                    repeated = [await kill_in_call() for _ in range(repeat)]
                last = progress()  # the call runs again; the next call will add one more
            result = await asyncio.wait_for(agents.session(session).result(), 300)
            assert result.status == "done", result
        finally:
            worker.stop()
    return first, repeated


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def heartbeat_requests(metrics: str) -> float:
    """The server's count of the heartbeats it was sent, as actions (what Temporal Cloud
    bills: one each), from its Prometheus page."""
    text = httpx.get(metrics, timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("action{") and 'action_type="grpc_RecordActivityTaskHeartbeat"' in line
    )


async def heartbeats_per_call_minute(
    address: str, metrics: str, tmp: Path, heartbeat: float
) -> float:
    """Server heartbeat requests per minute of a call running: one tool call of a
    minute, no kill (each heartbeat is a server action, billed on Temporal Cloud)."""
    queue = "recovery-heartbeats"
    ledger = tmp / f"{queue}.ledger"
    ledger.touch()
    worker = Worker(address, queue, ledger, tool_seconds=60)
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    agents = AgentClient(client, task_queue=queue)
    with ScriptedProvider(responder=responder("tool", 1)) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        spec = AgentSpec.model_validate(
            {
                "model": ModelSpec(name="scripted", endpoint=endpoint).model_dump(),
                "tools": ["long_task"],
                "session": {"end_after_reply": True, "heartbeat_timeout_seconds": heartbeat},
            }
        )
        worker.start()
        try:
            before = heartbeat_requests(metrics)
            session = await agents.start(spec, "one long task")
            await asyncio.wait_for(agents.session(session).result(), 300)
            after = heartbeat_requests(metrics)
        finally:
            worker.stop()
    return after - before


async def main(kills: int, streams: int, repeat: int, heartbeat: float) -> None:
    from durable_agent.temporal._local import temporal_binary

    rng = random.Random(20261122)
    per_stream = math.ceil(kills / streams)
    with tempfile.TemporaryDirectory() as tmp:
        metrics_port = free_port()
        env = await WorkflowEnvironment.start_local(
            data_converter=pydantic_data_converter,
            dev_server_existing_path=temporal_binary(),
            port=free_port(),
            dev_server_extra_args=["--metrics-port", str(metrics_port)],
        )
        address = env.client.service_client.config.target_host
        metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        try:
            started = time.monotonic()
            results = await asyncio.gather(
                *(
                    kill_stream(address, kind, s, per_stream, repeat, Path(tmp), rng, heartbeat)
                    for kind in ("tool", "model")
                    for s in range(streams)
                )
            )
            beats = await heartbeats_per_call_minute(address, metrics, Path(tmp), heartbeat)
        finally:
            await env.shutdown()
    took = time.monotonic() - started
    rows = {
        "tool call, killed once": [r[0] for r in results[:streams]],
        "model call, killed once": [r[0] for r in results[streams:]],
        f"tool call, killed {repeat} times in a row": [r[1] for r in results[:streams]],
        f"model call, killed {repeat} times in a row": [r[1] for r in results[streams:]],
    }
    print(
        f"Recovery after SIGKILL, heartbeat_timeout_seconds={heartbeat:g} ({took:.0f} s, "
        f"{streams} streams a kind); server heartbeats per call-minute: {beats:.0f}\n"
    )
    print("| call | kills | p50 | p95 | worst |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, per_stream_values in rows.items():
        values = list(itertools.chain(*per_stream_values))
        if values:
            print(
                f"| {name} | {len(values)} | {statistics.median(values):.1f} s "
                f"| {percentile(values, 0.95):.1f} s | {max(values):.1f} s |"
            )


async def serve_worker(address: str, task_queue: str, store: str) -> None:
    from durable_agent._activities.transcript_store import open_transcript_store

    from durable_agent._observability.logs import configure_logging
    from durable_agent.capabilities import Capabilities
    from durable_agent.temporal import build_worker

    configure_logging("warning")
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    transcripts = open_transcript_store(store)
    local = Capabilities.development()  # the specs carry the scripted model's loopback URL
    async with build_worker(
        client,
        task_queue=task_queue,
        registry=registry,
        transcripts=transcripts,
        capabilities=local,
    ):
        print("ready", flush=True)
        await asyncio.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        asyncio.run(serve_worker(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        parser = argparse.ArgumentParser(description="recovery after SIGKILL")
        parser.add_argument("--kills", type=int, default=30, help="kills per kind (>= 30)")
        parser.add_argument("--streams", type=int, default=3, help="kill streams per kind")
        parser.add_argument("--repeat", type=int, default=6, help="kills of one call in a row")
        parser.add_argument(
            "--heartbeat-seconds",
            type=float,
            default=15.0,
            help="the sessions' session.heartbeat_timeout_seconds (default: the project's)",
        )
        args = parser.parse_args()
        asyncio.run(main(args.kills, args.streams, args.repeat, args.heartbeat_seconds))
    exit_without_teardown(0)
