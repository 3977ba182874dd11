"""AgentWorkflow on the real Temporal dev server, with the scripted provider over HTTP."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AssistantMessage, parse_messages
from durable_agent._contracts.boundary import SessionStatus
from durable_agent._spec.tools import ToolContext
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text, error_reply
from tests.support.agent_harness import (
    cli_query,
    query_messages,
    record_history,
    running_worker,
    spec_for,
    start_session,
    temporal_cli,
    tool_messages,
    wait_for,
)

registry = Registry()
finished: list[str] = []
side_effects: list[str] = []
# Concurrency is proven by waiting, not timing: the four ``c`` calls pass a barrier that
# only four calls running at once can release (one at a time, the first waits for ever
# and its test fails on the bound below); the ``r`` calls finish in reverse, each
# released by the one after it.
together = asyncio.Barrier(4)
released = {f"r{k}": asyncio.Event() for k in range(4)}
NOBODY_CAME = 60.0
"""How long a call waits for the others before it fails the test (never hit when the
calls run in parallel, whatever the machine's load)."""


@tool(registry=registry)
async def slow_echo(label: str, seconds: float) -> str:
    """Wait for the rest of its batch, then echo the label (``seconds`` is only the
    scripted calls' shape)."""
    if label.startswith("c"):
        await asyncio.wait_for(together.wait(), NOBODY_CAME)
    elif label != "r3":
        await asyncio.wait_for(released[f"r{int(label[1:]) + 1}"].wait(), NOBODY_CAME)
    finished.append(label)
    if label in released:
        released[label].set()
    return f"echo:{label}"


@tool(registry=registry)
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"NYC": "72F sunny", "London": "55F rainy"}.get(city, "unknown city")


@tool(registry=registry)
def flaky(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


@tool(registry=registry, approval="always")
def delete_file(path: str, ctx: ToolContext) -> str:
    """Delete a file (needs a person's approval)."""
    side_effects.append(f"{ctx.idempotency_key}:{path}")
    return f"deleted {path}"


async def test_parallel_batch_runs_concurrently_and_joins_in_request_order(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    finished.clear()
    batch = [("slow_echo", {"label": f"c{k}", "seconds": 1.0}) for k in range(4)]
    # second batch: the last call finishes first
    reversed_batch = [("slow_echo", {"label": f"r{k}", "seconds": 0.8 - 0.2 * k}) for k in range(4)]
    script = [
        assistant_calls(*batch, ids="call_0"),
        assistant_calls(*reversed_batch, ids="call_0"),
        assistant_text("all done"),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            handle = await start_session(
                client, task_queue, spec_for(provider, ["slow_echo"]), "go"
            )
            result = await handle.result()
            messages = await query_messages(handle)
        await record_history(handle, "parallel_batch")

    assert result.status == "done" and result.final and result.final.content == "all done"
    assert sorted(finished[:4]) == ["c0", "c1", "c2", "c3"]  # all passed the barrier
    assert finished[4:] == ["r3", "r2", "r1", "r0"]  # finished last call first
    results = [m.content for m in tool_messages(messages)]
    assert results == [f"echo:c{k}" for k in range(4)] + [f"echo:r{k}" for k in range(4)]
    assert all(m.tool_call_id == "call_0" for m in tool_messages(messages))
    # the provider saw every result in request order, paired by position
    third_request = provider.requests[2].body["messages"]
    assert [m["content"] for m in third_request if m["role"] == "tool"] == results


async def test_errors_become_tool_results_the_model_can_read(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        AssistantMessage.model_validate(
            {
                "content": "",
                "tool_calls": [
                    {"id": "a", "function": {"name": "get_weather", "arguments": '{"city": "NYC"'}},
                    {
                        "id": "b",
                        "function": {"name": "get_weather", "arguments": '{"town": "NYC"}'},
                    },
                    {"id": "c", "function": {"name": "launch_rockets", "arguments": "{}"}},
                    {
                        "id": "d",
                        "function": {"name": "flaky", "arguments": '{"reason": "service down"}'},
                    },
                    {
                        "id": "e",
                        "function": {"name": "get_weather", "arguments": '{"city": "London"}'},
                    },
                ],
            }
        ),
        assistant_text("recovered"),
    ]
    flaky_settings = {"name": "flaky"}
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider, ["get_weather", flaky_settings])
            handle = await start_session(client, task_queue, spec, "try everything")
            result = await handle.result()
            messages = await query_messages(handle)
        await record_history(handle, "tool_errors")

    assert result.status == "done"
    results = tool_messages(messages)
    assert [r.is_error for r in results] == [True, True, True, True, None]
    assert "not valid JSON" in results[0].content
    assert "city: Field required" in results[1].content
    assert results[2].content.startswith("Tool not registered: launch_rockets")
    assert results[3].content == "Error calling 'flaky': RuntimeError: service down"
    assert results[4].content == "55F rainy"


async def test_approval_by_temporal_cli_one_approved_one_denied(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    side_effects.clear()
    script = [
        assistant_calls(
            ("delete_file", {"path": "/tmp/a"}),
            ("delete_file", {"path": "/tmp/b"}),
            ("get_weather", {"city": "NYC"}),
        ),
        assistant_text("deleted a, kept b"),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider, ["delete_file", "get_weather"])
            handle = await start_session(client, task_queue, spec, "clean up")

            async def two_pending() -> list[dict[str, object]] | None:
                found = await cli_query(temporal_env, handle.id, "pending_approvals")
                return found if len(found or []) == 2 else None

            answer = await wait_for(two_pending)
            ids = [p["approval_id"] for p in answer]
            assert ids == ["turn1-call0", "turn1-call1"]
            status: SessionStatus = await handle.query("status", result_type=SessionStatus)
            assert status.phase == "awaiting_approval" and not side_effects  # nothing ran yet

            def signal(name: str, payload: dict[str, str]) -> str:
                return temporal_cli(
                    temporal_env,
                    "workflow",
                    "signal",
                    "--workflow-id",
                    handle.id,
                    "--name",
                    name,
                    "--input",
                    json.dumps(payload),
                )

            await asyncio.to_thread(signal, "approve", {"approval_id": ids[0], "by": "alice"})
            # deciding again, or an unknown id, changes nothing and is visible in status
            await asyncio.to_thread(signal, "deny", {"approval_id": ids[0], "by": "mallory"})
            await asyncio.to_thread(signal, "approve", {"approval_id": "turn9-call9"})
            await asyncio.to_thread(
                signal, "deny", {"approval_id": ids[1], "by": "bob", "reason": "keep b"}
            )
            result = await handle.result()
            status = await handle.query("status", result_type=SessionStatus)
            messages = await query_messages(handle)
        await record_history(handle, "approval")

    assert result.status == "done" and result.final and result.final.content == "deleted a, kept b"
    a, b, weather = tool_messages(messages)
    assert a.content == "deleted /tmp/a" and a.approval and a.approval.by == "alice"
    assert b.content == "Tool call denied by bob: keep b" and b.is_error
    assert weather.content == "72F sunny"
    assert side_effects == [f"{handle.id}:1:0:/tmp/a"]
    assert status.phase == "done" and status.pending_approvals == []
    assert len(status.rejected_signals) == 2
    assert "already approved" in status.rejected_signals[0]
    assert "no call waits for a decision" in status.rejected_signals[1]


async def test_queries_by_temporal_cli_return_the_message_array(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_calls(("get_weather", {"city": "NYC"})), assistant_text("It is 72F.")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider, ["get_weather"], instructions="Be brief.")
            handle = await start_session(client, task_queue, spec, "Weather in NYC?")
            await handle.result()
            from_client = await query_messages(handle)
            answer = await cli_query(temporal_env, handle.id, "messages")
            tail = await cli_query(temporal_env, handle.id, "messages", "3")
    from_cli = parse_messages(answer)
    assert from_cli == from_client
    assert [m.role for m in from_cli] == ["system", "user", "assistant", "tool", "assistant"]
    assert parse_messages(tail) == from_client[3:]


async def test_non_retryable_provider_error_fails_the_session_visibly(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([error_reply(401, "Incorrect API key provided")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            handle = await start_session(client, task_queue, spec_for(provider), "hello")
            result = await handle.result()
            status = await handle.query("status", result_type=SessionStatus)
            messages = await query_messages(handle)
    assert len(provider.requests) == 1  # no retry storm
    assert result.status == "failed" and result.error and "401" in result.error
    assert "Incorrect API key provided" in result.error
    assert status.phase == "failed" and status.last_error == result.error
    assert messages[-1].is_error and messages[0].content == "hello"


async def test_unknown_tool_in_spec_is_rejected_at_start(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider() as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            handle = await start_session(
                client, task_queue, spec_for(provider, ["no_such_tool"]), "hi"
            )
            with pytest.raises(WorkflowFailureError) as failure:
                await handle.result()
    assert "no_such_tool" in str(failure.value.cause)
    assert provider.requests == []
