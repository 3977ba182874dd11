"""The live event stream's figures, on a real dev server with the worker in its own
process and the scripted provider streaming over real HTTP.

    ./run bench-live [--sessions 5] [--readers 100]

1. Latency from a chunk leaving the provider to its text reaching a ``follow()``
   reader (p50, p95), the answer streamed at 25 ms a chunk.
2. History bytes of workload A with live deltas on and off (its final answer streamed
   at once, and streamed at 25 ms a chunk).
3. ``durable-agent serve`` with ``--readers`` SSE readers of one session: the same
   latency at every reader, and the gateway's memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

from bench.run import PROMPT, ROOT, Bench, dev_server
from bench.workloads import A, bench_model
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.boundary import AgentResult
from durable_agent._spec.document import AgentInput, AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._wire.messages import AssistantMessage
from durable_agent.temporal._local import free_port
from durable_agent.temporal._process import exit_without_teardown
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import (
    RecordedRequest,
    Reply,
    chat_stream_events,
    sse_reply,
)

CHUNK_SECONDS = 0.025
#: 60 chunks of 16 characters: about 1.5 s of streaming.
ANSWER = "".join(f"token{n:03d} stream. " for n in range(60))[: 60 * 16]


def paced_answer() -> Reply:
    return sse_reply(chat_stream_events(assistant_text(ANSWER)), delay=CHUNK_SECONDS)


def model(request: RecordedRequest) -> AssistantMessage | Reply:
    name = request.body["model"]
    if name == "live-paced":
        return paced_answer()
    if name == "bench-a-paced":
        reply = bench_model(_as(request, "bench-a"))
        return paced_answer() if not reply.tool_calls else reply
    return bench_model(request)


def _as(request: RecordedRequest, model_name: str) -> RecordedRequest:
    body = {**request.body, "model": model_name}
    return RecordedRequest(request.method, request.path, request.headers, body)


def chunk_ends(sent: Sequence[tuple[float, bytes]]) -> list[tuple[int, float]]:
    """(where the text ends after each content chunk, when it was sent)."""
    ends, position = [], 0
    for at, piece in sent:
        text = piece.decode().removeprefix("data: ").strip()
        if not text.startswith("{"):
            continue
        for choice in json.loads(text).get("choices") or []:
            content = (choice.get("delta") or {}).get("content")
            if content:
                position += len(content)
                ends.append((position, at))
    return ends


def latencies(ends: list[tuple[int, float]], arrivals: list[tuple[float, int]]) -> list[float]:
    """Seconds from each chunk's sending to the arrival of the delta that carried it."""
    found, k = [], 0
    for at, position in arrivals:
        while k < len(ends) and ends[k][0] <= position:
            found.append(at - ends[k][1])
            k += 1
    return found


def spec_for(endpoint: ProviderEndpoint, name: str, live: bool, **more: Any) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "model": ModelSpec(name=name, endpoint=endpoint).model_dump(),
            "session": {"end_after_reply": True, "live_deltas": live},
            **more,
        }
    )


async def follow_latency(
    agents: AgentClient, provider: ScriptedProvider, spec: AgentSpec
) -> list[float]:
    sent_before = len(provider.sent)
    session = await agents.start(spec, PROMPT)
    arrivals: list[tuple[float, int]] = []
    received = 0
    async for event in agents.session(session).follow():
        if event.type == "text_delta":
            received += len(event.text)
            arrivals.append((time.monotonic(), received))
    return latencies(chunk_ends(provider.sent[sent_before:]), arrivals)


async def history_bytes(bench: Bench, agents: AgentClient, spec: AgentSpec) -> int:
    handle = await agents.temporal.start_workflow(
        "AgentWorkflow",
        AgentInput(spec=spec, message=PROMPT),
        id=f"live-{uuid.uuid4().hex[:8]}",
        task_queue=agents.task_queue,
        result_type=AgentResult,
    )
    result = await handle.result()
    assert result.status == "done", result
    counted, *_ = await bench.history_figures(handle.id)
    return counted


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def gateway_readers(
    address: str,
    task_queue: str,
    provider: ScriptedProvider,
    endpoint: ProviderEndpoint,
    readers: int,
) -> tuple[list[float], float, float, int]:
    """(latencies at every reader, gateway MB idle, MB peak, readers that got it all)."""
    spec_file = Path(tempfile.mkdtemp()) / "spec.json"
    spec_file.write_text(spec_for(endpoint, "live-paced", True, session={}).model_dump_json())
    port = free_port()
    gateway = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durable_agent._cli.main",
            "serve",
            "--task-queue",
            task_queue,
            "--port",
            str(port),
            "--spec",
            str(spec_file),
        ],
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": address},
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(
            base_url=base, timeout=120, limits=httpx.Limits(max_connections=readers + 10)
        ) as http:
            for _ in range(200):
                try:
                    await http.get("/api/sessions?limit=1")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            idle_mb = rss_mb(gateway.pid)
            session = (await http.post("/api/sessions", json={})).json()["session_id"]
            tasks = [asyncio.ensure_future(_sse_reader(http, session)) for _ in range(readers)]
            await asyncio.sleep(2.0)  # every reader connected and caught up
            sent_before = len(provider.sent)
            await http.post(f"/api/sessions/{session}/messages", json={"text": PROMPT})
            peak = idle_mb
            while not all(t.done() for t in tasks):
                peak = max(peak, rss_mb(gateway.pid))
                await asyncio.sleep(0.1)
            ends = chunk_ends(provider.sent[sent_before:])
            found: list[float] = []
            complete = 0
            for task in tasks:
                arrivals = task.result()
                complete += arrivals[-1][1] == len(ANSWER) if arrivals else 0
                found += latencies(ends, arrivals)
            await http.post(f"/api/sessions/{session}/end", json={})
        return found, idle_mb, peak, complete
    finally:
        gateway.terminate()
        gateway.wait(10)


async def _sse_reader(http: httpx.AsyncClient, session: str) -> list[tuple[float, int]]:
    arrivals: list[tuple[float, int]] = []
    received = 0
    async with http.stream("GET", f"/api/sessions/{session}/events") as response:
        kind = None
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:") and kind == "text_delta":
                received += len(json.loads(line[5:])["text"])
                arrivals.append((time.monotonic(), received))
            elif line.startswith("data:") and kind == "idle" and received:
                return arrivals
    return arrivals


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def main(sessions: int, readers: int) -> None:
    data = Path(tempfile.mkdtemp(prefix="durable-agent-bench-live-"))
    task_queue = f"bench-live-{uuid.uuid4().hex[:6]}"
    async with dev_server() as (address, client):
        worker = subprocess.Popen(
            [sys.executable, "-m", "bench.worker_process", "ours", address, task_queue, str(data)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        try:
            await measure_live(address, client, task_queue, sessions, readers)
        finally:
            worker.terminate()
            worker.wait(30)


async def measure_live(
    address: str, client: Client, task_queue: str, sessions: int, readers: int
) -> None:
    agents = AgentClient(client, task_queue=task_queue)
    with ScriptedProvider(responder=model) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        bench = Bench(address, client, provider)
        paced = spec_for(endpoint, "live-paced", True)
        await follow_latency(agents, provider, paced)  # warm-up
        found: list[float] = []
        for _ in range(sessions):
            found += await follow_latency(agents, provider, paced)
        tools = {"tools": [{"name": A.tool}], "stop": {"max_turns": A.model_calls + 1}}
        sizes = {
            (name, live): await history_bytes(
                bench, agents, spec_for(endpoint, name, live, **tools)
            )
            for name in ("bench-a", "bench-a-paced")
            for live in (False, True)
        }
        readers_found, idle_mb, peak_mb, complete = await gateway_readers(
            address, task_queue, provider, endpoint, readers
        )
    print(f"\nLive events ({sessions} sessions, {len(found)} chunks; {readers} SSE readers)\n")
    print("| figure | value | target |\n| --- | ---: | --- |")
    print(f"| chunk to follow() reader, p50 | {pct(found, 0.5):.0f} ms | < 150 ms |")
    print(f"| chunk to follow() reader, p95 | {pct(found, 0.95):.0f} ms |  |")
    for name, label in (("bench-a", "A"), ("bench-a-paced", "A, answer paced")):
        off, on = sizes[(name, False)], sizes[(name, True)]
        print(
            f"| history bytes, {label}: off / on | {off:,} / {on:,} "
            f"(+{(on - off) / off * 100:.1f}%) | <= +25% |"
        )
    print(f"| {readers} SSE readers: chunk to reader, p50 | {pct(readers_found, 0.5):.0f} ms |  |")
    p95 = pct(readers_found, 0.95)
    print(f"| {readers} SSE readers: chunk to reader, p95 | {p95:.0f} ms |  |")
    print(f"| {readers} SSE readers: readers with the whole answer | {complete} |  |")
    memory = f"{idle_mb:.0f} / {peak_mb:.0f} MB"
    print(f"| gateway memory, idle / with {readers} readers | {memory} |  |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the live event stream's figures")
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--readers", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.readers))
    exit_without_teardown(0)
