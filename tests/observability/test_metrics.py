"""A worker started with ``--metrics-address`` serves Prometheus metrics: the Temporal
SDK's own, ours (tokens, activity and tool latency and errors, approvals and their
wait, sessions by phase), and the span exporter's (spans it could not deliver to an
absent collector are counted, not waited for). Read over real HTTP and parsed with
prometheus_client's own parser."""

from __future__ import annotations

import asyncio

import httpx
from prometheus_client.parser import text_string_to_metric_families
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.document import ModelPrice
from durable_agent._wire.messages import Usage
from durable_agent.temporal._local import free_port
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import spec_for, worker_process
from tests.support.otlp_receiver import absent_collector

LATENCY = "durable_agent_activity_latency_count"


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def total(found: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    return sum(
        value
        for sample, got, value in found
        if sample == name and all(got.get(k) == v for k, v in labels.items())
    )


async def test_a_worker_serves_sdk_session_and_export_metrics(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    port = free_port()
    script = [
        assistant_calls(
            ("wipe_cache", {"name": "a"}),
            ("wipe_cache", {"name": "b"}),
            ("get_time", {"city": "NYC"}),
        ),
        # the provider's cache served 8 of the answer's 10 input tokens
        assistant_text(
            "done",
            usage=Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, cached_tokens=8),
        ),
    ]
    metrics = ("--metrics-address", f"127.0.0.1:{port}", "--otlp-endpoint")
    # no collector listens at ``absent``
    with absent_collector() as absent, worker_process(temporal_env, task_queue, *metrics, absent):
        with ScriptedProvider(script) as provider:
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            spec = spec_for(provider, ["wipe_cache", "get_time"])
            price = ModelPrice(input_per_million=1000, output_per_million=2000)
            spec = spec.model_copy(update={"model": spec.model.model_copy(update={"price": price})})
            session = await agents.start(spec, "go")
            asked = await agents.session(session).wait(timeout=30)
            await asyncio.sleep(0.3)  # a wait the histogram can see
            # "always" for the tool: the grant decides the batch's other waiting call too
            await agents.session(session).approve(
                asked.pending[0].approval_id, by="ana", always="tool"
            )
            assert (await agents.session(session).result()).status == "done"
        found: list[tuple[str, dict[str, str], float]] = []
        async with httpx.AsyncClient() as http:
            for _ in range(100):  # the SDK's buffer is drained once a second
                found = samples((await http.get(f"http://127.0.0.1:{port}/metrics")).text)
                if all(
                    (
                        total(found, "durable_agent_session_phase_entered_total", phase="done"),
                        total(found, "durable_agent_spans_dropped_total"),
                        total(found, LATENCY, activity="run_tool") >= 3,
                        total(found, LATENCY, activity="call_model") >= 2,
                    )
                ):
                    break
                await asyncio.sleep(0.2)
    queue = {"task_queue": task_queue}
    ours = sorted({n for n, _, _ in found if "workflow" in n})
    assert total(found, "temporal_workflow_completed_total", **queue) == 1, ours
    assert total(found, "durable_agent_model_tokens_total", direction="input", **queue) == 20
    assert total(found, "durable_agent_model_tokens_total", direction="output", **queue) == 10
    assert total(found, "durable_agent_model_cache_tokens_total", kind="read", **queue) == 8
    # by the model's price: 20 in at $1000/M, 10 out at $2000/M, in millionths of a dollar
    assert total(found, "durable_agent_model_cost_microusd_total", model="scripted-model") == 40_000
    assert total(found, "durable_agent_tool_calls_total", tool="wipe_cache", error="false") == 2
    assert total(found, "durable_agent_tool_calls_total", tool="get_time", error="false") == 1
    assert total(found, LATENCY, activity="call_model", outcome="ok", **queue) == 2
    assert total(found, LATENCY, activity="run_tool", outcome="ok", **queue) == 3
    assert total(found, "durable_agent_approvals_requested_total", tool="wipe_cache") == 2
    assert total(found, "durable_agent_approvals_decided_total", decision="approved") == 2
    assert total(found, "durable_agent_approval_wait_count", **queue) == 2
    wait = total(found, "durable_agent_approval_wait_sum", **queue)
    assert wait >= 300, wait
    entered = "durable_agent_session_phase_entered_total"
    left = "durable_agent_session_phase_left_total"
    for phase in ("calling_model", "awaiting_approval", "running_tools"):
        assert total(found, entered, phase=phase, **queue) >= 1, phase
        assert total(found, entered, phase=phase, **queue) == total(
            found, left, phase=phase, **queue
        ), f"no session is left in {phase}"
    assert total(found, entered, phase="done", **queue) == 1
    # the collector is away: what could not be delivered is counted, not waited for
    dropped = total(found, "durable_agent_spans_dropped_total", reason="export_failed")
    assert dropped >= 1, [s for s in found if "spans" in s[0]]
