"""Tracing over real OTLP/HTTP to a real receiver on 127.0.0.1: a worker started the way
users start it (``durable-agent worker --otlp-endpoint``) emits an ``execute``
span per model call (the GenAI semantic conventions' names and values) and an ``execute_tool`` span,
linked under temporalio's client, workflow and activity spans in one trace; message
content only when asked; a stalled or absent collector does not slow a session; and
replay emits no span twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from durable_agent._workflows import AgentWorkflow
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from durable_agent import AgentClient
from durable_agent._observability.tracing import bounded_batches
from durable_agent._tools.registry import Registry
from durable_agent._wire.options import ModelOptions
from durable_agent.temporal import build_worker
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import json_reply
from tests.support import cli_tools
from tests.support.agent_harness import LOCAL_DEVELOPMENT, spec_for, wait_for, worker_process
from tests.support.otlp_receiver import OtlpReceiver, absent_collector

ROOT = Path(__file__).parent.parent.parent
OPTIONS = {"temperature": 0.2, "max_output_tokens": 100, "seed": 7, "extra": {"logprobs": True}}


def traced_worker(
    env: WorkflowEnvironment, task_queue: str, endpoint: str, **extra_env: str
) -> Any:
    return worker_process(env, task_queue, "--otlp-endpoint", endpoint, **extra_env)


def traced_client(env: WorkflowEnvironment, endpoint: str) -> Client:
    """A client whose StartWorkflow span (the trace's root) goes to the same receiver."""
    provider = TracerProvider()
    exporter = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Client(
        env.client.service_client,
        namespace="default",
        data_converter=pydantic_data_converter,
        interceptors=[TracingInterceptor(tracer=provider.get_tracer("test-client"))],
    )


def script() -> list[Any]:
    return [assistant_calls(("get_time", {"city": "NYC"})), assistant_text("09:00 in NYC")]


async def _spans_arrived(receiver: OtlpReceiver) -> bool:
    return len(receiver.named("execute")) >= 2 and bool(receiver.named("execute_tool get_time"))


async def test_model_and_tool_spans_carry_the_genai_attributes_in_one_linked_trace(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with OtlpReceiver() as receiver, ScriptedProvider(script()) as provider:
        with traced_worker(temporal_env, task_queue, receiver.endpoint):
            agents = AgentClient(
                traced_client(temporal_env, receiver.endpoint), task_queue=task_queue
            )
            spec = spec_for(provider, ["get_time"])
            options = ModelOptions.model_validate(OPTIONS)
            spec = spec.model_copy(
                update={"model": spec.model.model_copy(update={"options": options})}
            )
            session = await agents.start(spec, "time in NYC?")
            assert (await agents.session(session).result()).status == "done"
            await wait_for(lambda: _spans_arrived(receiver), timeout=30)
        spans = list(receiver.spans)
    first, second = receiver.named("execute")
    [tool] = receiver.named("execute_tool get_time")
    [root] = [s for s in spans if s.name == "StartWorkflow:AgentWorkflow"]
    by_id = {s.span_id: s for s in spans}
    for span in (first, second, tool):
        assert span.trace_id == root.trace_id, "one trace from the client's start"
        parent = by_id[span.parent_id]
        assert parent.name.startswith("RunActivity:"), parent.name
        assert parent.service == "durable-agent-worker"
    for span, reason in ((first, "tool_calls"), (second, "stop")):
        attributes = span.attributes
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.request.model"] == "scripted-model"
        assert attributes["gen_ai.request.temperature"] == 0.2
        assert attributes["gen_ai.request.max_tokens"] == 100
        assert attributes["gen_ai.request.seed"] == 7
        assert attributes["gen_ai.request.logprobs"] is True
        assert attributes["gen_ai.usage.input_tokens"] == 10
        assert attributes["gen_ai.usage.output_tokens"] == 5
        assert attributes["gen_ai.response.finish_reasons"] == [reason]
        assert attributes["gen_ai.response.id"] == "chatcmpl-scripted"
        assert "gen_ai.input.messages" not in attributes, "content is off by default"
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "get_time"
    assert tool.attributes["gen_ai.tool.call.id"].startswith("call_")
    assert not tool.error and "gen_ai.tool.call.result" not in tool.attributes


async def test_message_content_goes_on_spans_only_when_asked(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with (
        OtlpReceiver() as receiver,
        ScriptedProvider(script()) as provider,
        traced_worker(
            temporal_env, task_queue, receiver.endpoint, DURABLE_AGENT_OTEL_CONTENT="true"
        ),
    ):
        agents = AgentClient(temporal_env.client, task_queue=task_queue)
        session = await agents.start(spec_for(provider, ["get_time"]), "time in NYC?")
        await agents.session(session).result()
        await wait_for(lambda: _spans_arrived(receiver), timeout=30)
    first = receiver.named("execute")[0]
    assert "time in NYC?" in first.attributes["gen_ai.input.messages"]
    [tool] = receiver.named("execute_tool get_time")
    assert tool.attributes["gen_ai.tool.call.result"] == "09:00"


async def test_a_stalled_or_absent_collector_does_not_slow_a_session(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The stalled collector holds every export it is sent; the sessions end all the
    same, while it still holds them: spans are dropped or queued, never waited for."""
    replies = [assistant_text(f"answer {n}") for n in range(6)]  # one for each session
    with (
        absent_collector() as absent,
        OtlpReceiver(stall=60) as stalled,
        ScriptedProvider(replies) as provider,
    ):
        agents = AgentClient(temporal_env.client, task_queue=task_queue)
        spec = spec_for(provider)
        statuses = []
        for endpoint, queue in ((stalled.endpoint, task_queue), (absent, f"{task_queue}-b")):
            with traced_worker(temporal_env, queue, endpoint):
                agents.task_queue = queue
                for _ in range(2):
                    statuses.append(
                        (await agents.session(await agents.start(spec, "hi")).result()).status
                    )
                await wait_for(lambda e=endpoint: _true(stalled.requests >= 1 or e == absent))
                # an export is under way (held by the stalled collector, or refused)
                statuses.append(
                    (await agents.session(await agents.start(spec, "hi")).result()).status
                )
                # every session ended while the collector still held what it was sent
                assert stalled.answered == 0
        assert stalled.requests >= 1, "the worker did try to export"
    assert statuses == ["done"] * 6


async def test_replay_emits_no_span_twice(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A worker that keeps no workflow in cache replays the whole history on every task;
    each span still appears once. A recorded history replayed emits none."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    interceptor = TracingInterceptor(tracer=provider.get_tracer("replay-test"))
    client = Client(
        temporal_env.client.service_client,
        namespace="default",
        data_converter=pydantic_data_converter,
        interceptors=[interceptor],
    )
    registry = Registry([cli_tools.get_time])
    with ScriptedProvider(script()) as scripted:
        async with build_worker(
            client,
            capabilities=LOCAL_DEVELOPMENT,
            task_queue=task_queue,
            registry=registry,
            preload_tokenizers=False,
            max_cached_workflows=0,
        ):
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec_for(scripted, ["get_time"]), "time in NYC?")
            assert (await agents.session(session).result()).status == "done"
            history = await client.get_workflow_handle(session).fetch_history()
    names = [s.name for s in exporter.get_finished_spans()]
    tasks = sum(1 for e in history.events if e.HasField("workflow_task_completed_event_attributes"))
    assert tasks >= 4, "the workflow was replayed from scratch several times"
    assert names.count("RunWorkflow:AgentWorkflow") == 1, names
    assert names.count("StartActivity:call_model") == 2, names
    assert names.count("StartActivity:run_tool") == 1, names
    exporter.clear()
    replayer = Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        interceptors=[interceptor],
    )
    await replayer.replay_workflow(WorkflowHistory.from_json(session, history.to_json()))
    assert [s.name for s in exporter.get_finished_spans()] == [], "replay emitted spans"


async def test_an_embeddings_call_is_an_embeddings_span_under_its_tool(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with OtlpReceiver() as receiver, ScriptedProvider() as provider:
        provider.add(
            assistant_calls(("embed_note", {"text": "hello", "base_url": provider.base_url})),
            json_reply(
                {
                    "object": "list",
                    "model": "text-embedding-3-small",
                    "data": [{"index": 0, "embedding": [0.1, 0.2, 0.3]}],
                    "usage": {"prompt_tokens": 4, "total_tokens": 4},
                }
            ),
            assistant_text("3 dimensions"),
        )
        with traced_worker(temporal_env, task_queue, receiver.endpoint):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            session = await agents.start(spec_for(provider, ["embed_note"]), "embed hello")
            assert (await agents.session(session).result()).final.content == "3 dimensions"  # type: ignore[union-attr]
            await wait_for(
                lambda: _true(bool(receiver.named("embeddings text-embedding-3-small"))),
                timeout=30,
            )
            await wait_for(lambda: _true(bool(receiver.named("execute_tool embed_note"))), 30)
    [span] = receiver.named("embeddings text-embedding-3-small")
    [tool] = receiver.named("execute_tool embed_note")
    assert span.parent_id == tool.span_id and span.trace_id == tool.trace_id
    assert span.attributes["gen_ai.operation.name"] == "embeddings"
    assert span.attributes["gen_ai.request.model"] == "text-embedding-3-small"
    assert span.attributes["gen_ai.usage.input_tokens"] == 4
    assert span.attributes["gen_ai.embeddings.dimension.count"] == 3
    assert provider.requests[1].path == "/v1/embeddings"
    assert provider.requests[1].body == {"model": "text-embedding-3-small", "input": "hello"}


async def test_an_image_generation_is_a_generate_content_span_under_its_tool(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    url = "https://images.example/cat.png"
    with OtlpReceiver() as receiver, ScriptedProvider() as provider:
        provider.add(
            assistant_calls(("draw", {"prompt": "a cat", "base_url": provider.base_url})),
            json_reply({"created": 1, "data": [{"url": url, "revised_prompt": "a cat, drawn"}]}),
            assistant_text("drawn"),
        )
        with traced_worker(temporal_env, task_queue, receiver.endpoint):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            session = await agents.start(spec_for(provider, ["draw"]), "draw a cat")
            await agents.session(session).result()
            messages = await agents.session(session).messages()
            await wait_for(lambda: _true(bool(receiver.named("generate_content gpt-image-1"))), 30)
            await wait_for(lambda: _true(bool(receiver.named("execute_tool draw"))), 30)
    [span] = receiver.named("generate_content gpt-image-1")
    [tool] = receiver.named("execute_tool draw")
    assert span.parent_id == tool.span_id
    assert span.attributes["gen_ai.operation.name"] == "generate_content"
    assert span.attributes["gen_ai.output.type"] == "image"
    assert span.attributes["gen_ai.response.image_count"] == 1
    assert provider.requests[1].path == "/v1/images/generations"
    assert provider.requests[1].body == {"model": "gpt-image-1", "prompt": "a cat"}
    assert messages[2].content == url


async def _true(value: bool) -> bool:
    return value


def test_a_full_queue_drops_spans_and_counts_them() -> None:
    """The collector stalls; 50 spans end at once into a queue of 5: ending a span never
    waits, and every span that found the queue full is counted."""
    buffer = MetricBuffer(10_000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    with OtlpReceiver(stall=30) as stalled:
        exporter = OTLPSpanExporter(endpoint=f"{stalled.endpoint}/v1/traces", timeout=1)
        provider = TracerProvider()
        provider.add_span_processor(bounded_batches(exporter, runtime.metric_meter, 5))
        tracer = provider.get_tracer("queue-test")
        for n in range(50):
            with tracer.start_as_current_span(f"span {n}"):
                pass
        held = stalled.answered  # read before the receiver lets anything go
    # what the queue still holds goes nowhere now: no export thread outlives the test
    # (a later test's server could get the port and receive its spans)
    provider.shutdown()
    dropped = sum(
        update.value
        for update in buffer.retrieve_updates()
        if update.metric.name == "durable_agent_spans_dropped"
        and dict(update.attributes).get("reason") == "queue_full"
    )
    # a queue that made span ends wait for capacity would have dropped nothing: every span
    # would have waited for the stalled export instead
    assert held == 0 and dropped >= 40, (held, dropped)
