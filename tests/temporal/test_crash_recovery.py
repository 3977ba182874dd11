"""Kills concentrated on single calls, with the project's default settings: three
SIGKILLs during one streamed model call and three during one tool call (one of them
after the tool's effect happened). Neither the model's nor the tool's attempts are
used up, the transcript is the undisturbed one, the payment is made once (the tool's
effect check answers the last retry), and every recovery takes seconds.

Each part has its own worker pool and task queue, so the two run side by side."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from temporalio.api.enums.v1 import TimeoutType
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._wire.messages import AssistantMessage, ToolMessage
from durable_agent.temporal._local import free_port
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest, Reply, chat_stream_events
from tests.support.agent_harness import default_spec, wait_for
from tests.temporal.test_chaos import WorkerPool, _retrying, ledger_effects

STREAM_SECONDS = 6.0


def slow_stream(message: AssistantMessage) -> Reply:
    events = chat_stream_events(message)
    chunks = tuple(f"data: {json.dumps(e)}\n\n".encode() for e in events)
    return Reply(
        sse=True, chunks=(*chunks, b"data: [DONE]\n\n"), delay=STREAM_SECONDS / len(chunks)
    )


def paying_model(request: RecordedRequest) -> Reply:
    """Pays once, then says so; streams slowly so kills land mid-stream."""
    tool_results = [m for m in request.body["messages"] if m["role"] == "tool"]
    if not tool_results:
        return slow_stream(assistant_calls(("pay", {"account": "acct-1", "amount": 10})))
    return slow_stream(assistant_text(f"done: {tool_results[0]['content']}"))


async def _kill_when(pool: WorkerPool, ready: object, kills: list[float]) -> None:
    await wait_for(ready, timeout=120, interval=0.05)  # type: ignore[arg-type]
    await asyncio.to_thread(pool.kill)
    kills.append(time.monotonic())


async def _session(
    env: WorkflowEnvironment, tmp: Path, tag: str, kill_plan: str
) -> dict[str, object]:
    address = env.client.service_client.config.target_host
    agents = AgentClient(env.client, task_queue=f"crash-{tag}")
    ledger = tmp / f"ledger-{tag}.txt"
    pool = WorkerPool(
        address,
        agents.task_queue,
        ledger,
        f"sqlite:///{tmp / f'{tag}.sqlite'}",
        CHAOS_REPORT_DELAY="4",
    )
    kills: list[float] = []
    progress: list[float] = []
    with ScriptedProvider(responder=paying_model) as provider:
        spec = default_spec(provider, ["pay"], session={"end_after_reply": True})
        await asyncio.to_thread(pool.start)
        try:
            session = await agents.start(spec, "pay acct-1 ten", session_id=f"crash-{tag}")
            lines = lambda: ledger.read_text().splitlines() if ledger.exists() else []  # noqa: E731
            if kill_plan == "model":
                for n in (1, 2, 3):  # the same first model call, three times mid-stream

                    async def streaming(n: int = n) -> bool:
                        return len(provider.requests) == n

                    await _kill_when(pool, streaming, kills)
                    await asyncio.sleep(0)
                await wait_for(lambda: _true(len(provider.requests) == 4), timeout=120)
                progress.extend(_arrivals(provider, 2, 4))
            else:
                for n, marker in ((1, "start"), (2, "start"), (1, "effect")):
                    # twice before the payment, once after it and before its report

                    async def reached(n: int = n, marker: str = marker) -> bool:
                        return sum(ln.startswith(marker) for ln in lines()) >= n

                    await _kill_when(pool, reached, kills)
                    before = len(lines())
                    await wait_for(
                        lambda b=before: _true(len(lines()) > b or len(provider.requests) > 1),
                        timeout=120,
                    )
                    progress.append(time.monotonic())
            result = await asyncio.wait_for(agents.session(session).result(), 180)
            array = await agents.session(session).messages()
        finally:
            pool.stop()
    starts, effects = ledger_effects(ledger)
    return {
        "result": result,
        "array": array,
        "requests": len(provider.requests),
        "recoveries": [p - k for k, p in zip(kills, progress, strict=False)],
        "starts": sum(starts.values()),
        "effects": sum(effects.values()),
    }


async def _true(value: bool) -> bool:
    return value


def _arrivals(provider: ScriptedProvider, first: int, last: int) -> list[float]:
    """When requests ``first``..``last`` (1-based) reached the provider, monotonic time."""
    return [r.received_at for r in provider.requests[first - 1 : last]]


def _check(outcome: dict[str, object]) -> None:
    result, array = outcome["result"], outcome["array"]
    assert getattr(result, "status", None) == "done", result
    assert isinstance(array, list)
    [paid] = [m for m in array if isinstance(m, ToolMessage)]
    assert paid.content == "paid 10 to acct-1" and not paid.is_error, paid
    assert array[-1].content == "done: paid 10 to acct-1"
    assert outcome["effects"] == 1, "the payment was made once"


async def test_three_kills_in_one_model_call_and_three_in_one_tool_call(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    model, tool = await asyncio.gather(
        _session(temporal_env, tmp_path, "model", "model"),
        _session(temporal_env, tmp_path, "tool", "tool"),
    )
    _check(model)
    _check(tool)
    assert model["requests"] == 5, "one request per kill of the first call, then the second"
    assert tool["requests"] == 2
    # started three times (the third paid, then its worker died); the fourth delivery
    # was answered by the effect check and did not start the tool again
    assert tool["starts"] == 3, tool["starts"]
    for name, outcome in (("model call", model), ("tool call", tool)):
        times = ", ".join(f"{t:.1f} s" for t in outcome["recoveries"])  # type: ignore[attr-defined]
        print(f"\n{name}: 3 kills, recovery (kill to next progress): {times}")
        assert len(outcome["recoveries"]) == 3  # type: ignore[arg-type]


async def test_a_60_second_server_outage_costs_seconds_once_it_is_back(tmp_path: Path) -> None:
    """The Temporal server stops mid tool call and returns a minute later on the same
    SQLite file and port. The worker lives through it; the call whose completion could
    not be reported is retried one heartbeat timeout later, not one start-to-close."""
    from durable_agent.temporal import start_dev_server

    data, port, ui_port = tmp_path / "server", free_port(), free_port()
    env = await start_dev_server(data, port, ui_port)
    address = env.client.service_client.config.target_host
    ledger = tmp_path / "ledger-outage.txt"
    pool = WorkerPool(address, "outage", ledger, "memory:", CHAOS_REPORT_DELAY="3")
    try:
        with ScriptedProvider(responder=paying_model) as provider:
            client = await Client.connect(address, data_converter=pydantic_data_converter)
            agents = AgentClient(client, task_queue="outage")
            spec = default_spec(provider, ["pay"], session={"end_after_reply": True})
            await asyncio.to_thread(pool.start)
            session = await agents.start(spec, "pay acct-1 ten", session_id="outage")
            await wait_for(
                lambda: _true(ledger.exists() and "start" in ledger.read_text()), timeout=60
            )
            await env.shutdown()  # the server goes away mid tool call...
            await asyncio.sleep(60)
            env = await start_dev_server(data, port, ui_port)  # ...and comes back
            result = await _retrying(lambda: agents.session(session).result(), 300)
            array = await _retrying(lambda: agents.session(session).messages())
            history = await _retrying(lambda: client.get_workflow_handle(session).fetch_history())
            assert pool.process is not None and pool.process.poll() is None, "worker died"
    finally:
        pool.stop()
        await env.shutdown()
    _, effects = ledger_effects(ledger)
    _check({"result": result, "array": array, "effects": sum(effects.values())})
    # a retried attempt of the tool was retried because its heartbeats stopped (noticed in
    # seconds), never because a start-to-close timeout ran out: read from the history
    lost = _retry_causes(history, "run_tool")
    print(f"\nserver down 60 s mid tool call: tool attempts retried because of {lost}")
    assert set(lost) <= {"heartbeat"}, lost


def _retry_causes(history: WorkflowHistory, activity: str) -> list[str]:
    """Why each later attempt of ``activity`` was started: its last failure's timeout."""
    kinds: dict[int, str] = {}
    causes = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            scheduled = event.activity_task_scheduled_event_attributes
            kinds[event.event_id] = scheduled.activity_type.name
        if event.HasField("activity_task_started_event_attributes"):
            started = event.activity_task_started_event_attributes
            if kinds.get(started.scheduled_event_id) == activity and started.attempt > 1:
                timeout = started.last_failure.timeout_failure_info.timeout_type
                causes.append(TimeoutType.Name(timeout).removeprefix("TIMEOUT_TYPE_").lower())
    return causes
