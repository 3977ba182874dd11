"""Tools whose output comes from outside: the owner registers the tool with
``external_output=True``; its calls never run on a worker and wait until someone who
may decide the session's calls commits the output (``commit_tool_output``), or the
deadline denies them. A session's spec cannot make another tool take its output from outside, and a
call that a worker runs returns its own result: a commit for it changes nothing."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client.results import DecisionRefusedError, UnknownApprovalError
from durable_agent._contracts.approvals import PendingApproval
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.gateway.test_gateway import address_of, events_until
from tests.support.agent_harness import running_worker, spec_for, wait_for
from tests.support.gateway_harness import gateway

ran: list[str] = []
registry = Registry()


@tool(registry=registry, external_output=True)
def pick_colour(question: str) -> str:
    """Ask the person at the screen to pick a colour (the page answers)."""
    ran.append("pick_colour")
    return "the worker should never run this"


@tool(registry=registry)
def lookup(key: str) -> str:
    """Look a key up."""
    ran.append("lookup")
    return f"value of {key}"


@tool(
    registry=registry,
    external_output=True,
    approval_timeout_seconds=1,
    approval_timeout_decision="approved",
)
def slow_answer(question: str) -> str:
    """An answer that may never come."""
    ran.append("slow_answer")
    return "never"


async def _pending(agents: AgentClient, sid: str) -> Any:
    return await agents.session(sid).pending_approvals()


async def test_an_output_from_outside_is_the_calls_result_and_nothing_runs(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    ran.clear()
    script = [
        assistant_calls(("pick_colour", {"question": "which?"}), ("lookup", {"key": "a"})),
        assistant_text("teal it is"),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["pick_colour", "lookup"])
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "pick a colour")
            [waiting] = await wait_for(lambda: _pending(agents, sid), timeout=60)
            assert waiting.tool_name == "pick_colour" and waiting.awaits_output
            # it is not the approvers' to run: only an output (or a denial) answers it
            with pytest.raises(DecisionRefusedError, match="commit its output"):
                await agents.session(sid).approve(waiting.approval_id, by="frontend")
            await agents.session(sid).commit_tool_output(waiting.approval_id, "teal", by="frontend")
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    assert result.final is not None and result.final.content == "teal it is"
    tools = [m for m in messages if isinstance(m, ToolMessage)]
    assert [(t.tool_name, t.content, t.mode) for t in tools] == [
        ("pick_colour", "teal", "tool"),
        ("lookup", "value of a", "tool"),
    ]
    assert tools[0].approval is not None and tools[0].approval.by == "frontend"
    assert ran == ["lookup"]  # the external tool's function never ran
    # the model read the committed output as the call's result
    second = provider.requests[1].body["messages"]
    assert {"role": "tool", "tool_call_id": tools[0].tool_call_id, "content": "teal"} in [
        {k: m.get(k) for k in ("role", "tool_call_id", "content")} for m in second
    ]


async def test_no_output_by_the_deadline_is_a_denial_whatever_the_default(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    ran.clear()
    script = [assistant_calls(("slow_answer", {"question": "?"})), assistant_text("no answer")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["slow_answer"])
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "ask slowly")
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    [denied] = [m for m in messages if isinstance(m, ToolMessage)]
    assert denied.is_error and denied.approval is not None
    assert denied.approval.decision == "denied" and denied.approval.timed_out
    assert result.status == "done" and ran == []


async def test_a_spec_cannot_take_a_tools_output_from_outside(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Nothing a spec carries marks a tool external: the setting is not in a tool's
    per-session settings, so the worker runs ``lookup`` and no commit can stand in."""
    ran.clear()
    script = [assistant_calls(("lookup", {"key": "a"})), assistant_text("done")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["lookup"]).model_dump()
        spec["tools"] = [{"name": "lookup", "external_output": True}]
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            with pytest.raises(ValueError, match="external_output"):
                await agents.start(spec, "look a up")
    assert ran == []


may_finish = asyncio.Event()


@tool(registry=registry)
async def long_job(name: str) -> str:
    """A job that takes a while."""
    ran.append("long_job")
    await may_finish.wait()
    return f"{name} finished on the worker"


async def test_a_call_running_on_a_worker_makes_its_own_result(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    ran.clear()
    may_finish.clear()
    script = [assistant_calls(("long_job", {"name": "build"})), assistant_text("built")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["long_job"])
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "build it")
            await wait_for(_job_started, timeout=60)  # the tool runs on the worker now
            with pytest.raises(UnknownApprovalError, match="returns its own result: nobody can"):
                await agents.session(sid).commit_tool_output("turn1-call0", "forged", by="x")
            may_finish.set()
            await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    [result] = [m for m in messages if isinstance(m, ToolMessage)]
    assert result.content == "build finished on the worker" and result.approval is None


async def _job_started() -> bool:
    return ran == ["long_job"]


async def test_a_page_gives_the_output_through_the_gateway(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    ran.clear()
    script = [assistant_calls(("pick_colour", {"question": "which?"})), assistant_text("teal")]
    with ScriptedProvider(script) as provider:
        path = tmp_path / "spec.json"
        path.write_text(spec_for(provider, ["pick_colour"]).model_dump_json())
        async with running_worker(temporal_env, task_queue, registry):
            with gateway(address_of(temporal_env), task_queue, path) as base:
                async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                    started = await http.post("/api/sessions", json={"message": "pick one"})
                    sid = started.json()["session_id"]
                    events = f"/api/sessions/{sid}/events"
                    asked = await events_until(http, events, "approval_requested")
                    waiting = asked[-1].data["approval"]
                    assert waiting["awaits_output"] is True
                    calls = f"/api/sessions/{sid}/approvals/{waiting['approval_id']}"
                    refused = await http.post(f"{calls}/approve", json={})
                    assert refused.status_code == 409 and "commit its output" in refused.text
                    given = await http.post(f"{calls}/output", json={"content": "teal"})
                    assert given.status_code == 202, given.text
                    await events_until(http, f"{events}?after={asked[-1].id}", "turn_ended")
                    messages = (await http.get(f"/api/sessions/{sid}/messages")).json()
    [result] = [m for m in messages if m["role"] == "tool"]
    assert result["content"] == "teal" and result["approval"]["decision"] == "responded"
    assert ran == []


def test_a_chat_window_is_told_how_to_give_an_output_not_to_approve() -> None:
    """The OpenAI entry point's text for a reply that waits: a call whose output comes from
    outside is given at its ``output`` route; a gated call is approved or denied."""
    from durable_agent.gateway._openai_common import waiting_text

    asked = PendingApproval(
        approval_id="turn1-call0",
        turn=1,
        slot=0,
        tool_name="pick_colour",
        arguments='{"question": "which?"}',
        requested_at=datetime.now(UTC),
        awaits_output=True,
    )
    gated = asked.model_copy(
        update={"approval_id": "turn1-call1", "slot": 1, "tool_name": "wipe", "awaits_output": None}
    )
    shown = waiting_text("s-1", [asked, gated]).splitlines()
    base = "/api/sessions/s-1/approvals"
    assert shown[2].startswith(f'  its output: POST {base}/turn1-call0/output {{"content": "..."}}')
    assert "approve" not in shown[2]
    assert shown[4].startswith(f"  approve: POST {base}/turn1-call1/approve")
