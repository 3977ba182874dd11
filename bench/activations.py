"""How long the slowest workflow task takes as a session grows: a run that starts
carrying 100, 1,000 and 10,000 messages (and answers one more message), one turn of
100, 1,000 and 2,500 tool calls, and one turn of as many calls that all wait for a
person, who approves them with one decision ("always" for the tool).

    ./run bench-activations [--sizes-messages 100,1000,10000] [--sizes-calls 100,1000,2500]
                            [--sizes-gated 100,1000,2500] [--budget-tokens N]
                            [--heartbeat-seconds S]

``--budget-tokens``: the long sessions' model has a context budget of that many tokens,
so each request leaves most of the array out (and that is counted).

The figure is the SDK's own ``temporal_workflow_task_execution_latency`` (from the
task's start on the worker to its completion), read from an in-process metric buffer:
the slowest task of each session and the sum over its tasks. The tools run on a worker
process of their own (their own task queue, as a fleet of tool workers would), so the
thousands of tool calls do not take the workflow's core; the worker and the scripted
model share this process. The SDK fails a task that does not yield within 2 s; the
target is flat, under 100 ms on one quiet core. The workflow's own CPU in its slowest
activation is printed as it is and less the collector's passes that came due in it (a
pass walks what the process allocated since the last one, whichever task it lands in;
the worker's thresholds are in ``durable_agent/temporal/_process.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import date
from pathlib import Path
from typing import Any

import temporalio.worker._workflow_instance
from durable_agent._activities.transcript_store import open_transcript_store
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig

from bench.run import dev_server
from durable_agent._client.sessions import AgentClient
from durable_agent._observability.logs import configure_logging
from durable_agent._spec.document import AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.context import ContextRules
from durable_agent._wire.messages import AssistantMessage, Message, UserMessage
from durable_agent.capabilities import Capabilities
from durable_agent.temporal import build_worker
from durable_agent.temporal._process import freeze_startup_heap
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest

LATENCY = "temporal_workflow_task_execution_latency"


@tool
def echo(n: int) -> str:
    """Say the number back."""
    return f"echo {n}"


def replies(request: RecordedRequest) -> AssistantMessage:
    """Calls when the model is named ``calls-N`` and has not called yet; else a text."""
    name, body = request.body["model"], request.body
    asked = name.startswith("calls-") and not any(m["role"] == "tool" for m in body["messages"])
    if asked:
        return assistant_calls(*[("echo", {"n": n}) for n in range(int(name[6:]))])
    return assistant_text(f"read {len(body['messages'])} messages")


def spec(
    provider: ScriptedProvider,
    model: str,
    calls: int = 0,
    queue: str = "",
    gated: bool = False,
    budget: int | None = None,
) -> AgentSpec:
    endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
    session: dict[str, Any] = {"max_concurrent_tool_calls": 50, "end_after_reply": bool(calls)}
    heartbeat = os.environ.get("BENCH_HEARTBEAT_SECONDS")
    if heartbeat:  # --heartbeat-seconds: the recovery setting under a big batch
        session["heartbeat_timeout_seconds"] = float(heartbeat)
    echo = {"name": "echo", "task_queue": f"{queue}-tools"}
    context = ContextRules(budget_tokens=budget)
    return AgentSpec(
        model=ModelSpec(name=model, endpoint=endpoint, stream=False, context=context),
        tools=[{**echo, "approval": "always"} if gated else echo] if calls else [],
        stop={"max_tool_calls_per_turn": max(calls, 1)},
        session=session,
    )


def carried(count: int) -> list[Message]:
    history: list[Message] = []
    for k in range(count // 2):
        history += [UserMessage(content=f"q{k}"), AssistantMessage(content=f"a{k}")]
    return history


#: Each activation: its CPU in the workflow's own code, and the collector's share of it
#: (activations that only answer queries apart: an answer grows with what it lists).
OWN_CPU_MS: list[tuple[float, float]] = []
QUERY_CPU_MS: list[float] = []
_COLLECTING = {"since": 0.0, "ms": 0.0}


def _collector(phase: str, info: dict[str, int]) -> None:
    """The garbage collector's CPU, added up (``gc.callbacks``)."""
    if phase == "start":
        _COLLECTING["since"] = time.thread_time()
    else:
        _COLLECTING["ms"] += (time.thread_time() - _COLLECTING["since"]) * 1000


def watch_activations() -> None:
    """Record the CPU each activation takes in the workflow's own code (the thread's CPU
    time while the SDK's instance applies it): the part of a task that is ours, without
    the SDK's payload decoding, encoding and waiting that its latency figure includes.
    (A private SDK method, wrapped in this benchmark only.) The collector's passes that
    came due in it are told apart: they walk what every session allocated since the last
    pass, whichever task they land in."""
    instance = temporalio.worker._workflow_instance._WorkflowInstanceImpl
    activate = instance.activate
    gc.callbacks.append(_collector)

    def timed(self: Any, act: Any) -> Any:
        _COLLECTING["ms"] = 0.0
        start = time.thread_time()
        try:
            return activate(self, act)
        finally:
            cpu = (time.thread_time() - start) * 1000
            if all(job.WhichOneof("variant") == "query_workflow" for job in act.jobs):
                QUERY_CPU_MS.append(cpu)
            else:
                OWN_CPU_MS.append((cpu, _COLLECTING["ms"]))

    instance.activate = timed  # type: ignore[method-assign]


def task_figures(buffer: MetricBuffer) -> tuple[float, float, int, float, float, float]:
    """The slowest task (ms), the sum (ms), the number of tasks since the last call, the
    most CPU one activation took in the workflow's own code (ms), the most without the
    collector's passes (ms), and the most one query's answer took (ms)."""
    values = [float(u.value) for u in buffer.retrieve_updates() if u.metric.name == LATENCY]
    own = max((cpu for cpu, _ in OWN_CPU_MS), default=0.0)
    without = max((cpu - collecting for cpu, collecting in OWN_CPU_MS), default=0.0)
    query = max(QUERY_CPU_MS, default=0.0)
    OWN_CPU_MS.clear()
    QUERY_CPU_MS.clear()
    return (max(values, default=0.0), sum(values), len(values), own, without, query)


async def measured(
    buffer: MetricBuffer, label: str, run: Callable[[], Awaitable[None]]
) -> tuple[str, float, float, int, float, float, float]:
    task_figures(buffer)  # what came before is not this session's
    await run()
    await asyncio.sleep(1.5)  # the last figures reach the buffer
    return (label, *task_figures(buffer))


async def approved_at_once(agents: AgentClient, session: str, calls: int) -> None:
    """Once every call waits, one person approves the first "always": the grant
    approves the rest of the batch that waits."""
    pending = await agents.session(session).pending_approvals()
    while len(pending) < calls:
        await asyncio.sleep(0.2)
        pending = await agents.session(session).pending_approvals()
    await agents.session(session).approve(pending[0].approval_id, by="bench", always="tool")


async def main(
    message_sizes: list[int],
    call_sizes: list[int],
    gated_sizes: list[int],
    budget: int | None = None,
) -> None:
    watch_activations()
    buffer = MetricBuffer(1_000_000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    rows = []
    async with dev_server() as (address, _):
        client = await Client.connect(
            address, runtime=runtime, data_converter=pydantic_data_converter
        )
        queue = f"bench-activations-{uuid.uuid4().hex[:6]}"
        store = Path(tempfile.mkdtemp(prefix="bench-activations-")) / "transcripts.sqlite"
        tools = tool_worker(address, f"{queue}-tools", f"sqlite:///{store}")
        with ScriptedProvider(responder=replies, keep_requests=False) as provider:
            worker = build_worker(
                client,
                task_queue=queue,
                # the session's worker resolves the tools it routes (they run elsewhere)
                registry=Registry([echo]),
                preload_tokenizers=False,
                capabilities=Capabilities.development(),
                transcripts=open_transcript_store(f"sqlite:///{store}"),
            )
            freeze_startup_heap()  # as ``durable-agent worker`` does before it polls
            async with worker:
                agents = AgentClient(client, task_queue=queue)
                for size in message_sizes:

                    async def long_session(size: int = size) -> None:
                        session = await agents.start(
                            spec(provider, "talk", budget=budget), "go", history=carried(size)
                        )
                        await agents.session(session).wait(after=size, timeout=300)
                        await agents.session(session).send("and one more")
                        await agents.session(session).wait(after=size + 2, timeout=300)
                        await agents.session(session).end()

                    rows.append(await measured(buffer, f"{size:,} messages", long_session))
                for calls in call_sizes:

                    async def wide_turn(calls: int = calls) -> None:
                        session = await agents.start(
                            spec(provider, f"calls-{calls}", calls, queue), "echo them"
                        )
                        result = await agents.session(session).result()
                        assert result.status == "done", result.error

                    rows.append(await measured(buffer, f"{calls:,} calls in a turn", wide_turn))
                for calls in gated_sizes:

                    async def gated_turn(calls: int = calls) -> None:
                        model = f"calls-{calls}"
                        gated = spec(provider, model, calls, queue, gated=True)
                        session = await agents.start(gated, "echo them")
                        await approved_at_once(agents, session, calls)
                        result = await agents.session(session).result()
                        assert result.status == "done", result.error

                    label = f"{calls:,} calls approved"
                    rows.append(await measured(buffer, label, gated_turn))
    tools.terminate()
    tools.wait(30)
    print(f"Slowest workflow task, {date.today()}, {platform.machine()}, {os.cpu_count()} cores")
    print(
        f"{'session':<24}{'slowest task ms':>16}{'all tasks ms':>14}{'tasks':>7}"
        f"{'own CPU ms':>12}{'... less GC':>13}{'query ms':>10}"
    )
    for label, slowest, total, tasks, own, without, query in rows:
        print(
            f"{label:<24}{slowest:>16.0f}{total:>14.0f}{tasks:>7}{own:>12.0f}"
            f"{without:>13.0f}{query:>10.0f}"
        )


def tool_worker(address: str, task_queue: str, store: str) -> subprocess.Popen[str]:
    """``durable-agent worker`` serving the tools on their own queue (and store, shared
    with the workflow's worker: a model call refers to the results the tools kept)."""
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durable_agent._cli.main",
            "worker",
            "--tools",
            "bench.activations",
            "--address",
            address,
            "--task-queue",
            task_queue,
            "--transcript-store",
            store,
            "--trust-specs",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert worker.stdout is not None and "worker ready" in worker.stdout.readline()
    return worker


def sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes-messages", type=sizes, default=[100, 1000, 10000])
    parser.add_argument("--sizes-calls", type=sizes, default=[100, 1000, 2500])
    parser.add_argument("--sizes-gated", type=sizes, default=[100, 1000, 2500])
    parser.add_argument("--budget-tokens", type=int, default=None)
    parser.add_argument(
        "--heartbeat-seconds",
        type=float,
        default=None,
        help="the sessions' session.heartbeat_timeout_seconds (default: the project's)",
    )
    args = parser.parse_args()
    configure_logging("warning")  # a log line per call would be the figure
    if args.heartbeat_seconds is not None:
        os.environ["BENCH_HEARTBEAT_SECONDS"] = str(args.heartbeat_seconds)
    asyncio.run(main(args.sizes_messages, args.sizes_calls, args.sizes_gated, args.budget_tokens))
