"""Another agent as a tool: each call is a child session (a child workflow) whose id
comes from the parent's call slot, readable like any session; its answer is the result,
its usage the parent's too; cancelling the parent's turn cancels it."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.document import SubAgentSpec
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest, Reply, chat_stream_events
from tests.support.agent_harness import (
    KILL_HEARTBEAT_SECONDS,
    record_history,
    running_worker,
    spec_for,
    wait_for,
)

RESEARCHER = "You research one question and answer in one sentence."


def model(slow_child: bool) -> Any:
    """The parent delegates once, then answers; the child (by its instructions) answers,
    its first call slowly when asked to (a cancel or a kill lands in it)."""
    child_calls: list[int] = []

    def answer(request: RecordedRequest) -> Any:
        messages = request.body["messages"]
        if messages[0] == {"role": "system", "content": RESEARCHER}:
            child_calls.append(1)
            reply = assistant_text(f"Found: {messages[-1]['content']} is 42.")
            if slow_child and len(child_calls) == 1:
                events = chat_stream_events(reply)
                chunks = tuple(f"data: {json.dumps(e)}\n\n".encode() for e in events)
                return Reply(sse=True, chunks=(*chunks, b"data: [DONE]\n\n"), delay=10)
            return reply
        if any(m["role"] == "tool" for m in messages):
            return assistant_text("The researcher says 42.")
        return assistant_calls(("researcher", {"task": "the answer"}))

    return answer


def parent_spec(provider: ScriptedProvider, **session: Any) -> Any:
    child = spec_for(provider, [], instructions=RESEARCHER).model_dump()
    agents = [{"name": "researcher", "description": "Researches a question", "spec": child}]
    return spec_for(provider, [], agents=agents, session=session)


async def test_a_sub_agent_runs_as_a_child_session(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider(responder=model(slow_child=False)) as provider:
        spec = parent_spec(provider, end_after_reply=True)
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            # a recorded history replays under its file's name: the child's id comes from it
            recording = os.environ.get("DURABLE_AGENT_RECORD_HISTORIES")
            session = await agents.start(
                spec, "ask the researcher", session_id="sub_agent" if recording else None
            )
            result = await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
            child_id = (
                f"{session}--researcher-t1c0-{(await agents.session(session).run_chain())[:8]}"
            )
            child = await agents.session(child_id).messages()  # a session like any other
            child_result = await agents.session(child_id).result()
            await record_history(client.get_workflow_handle(session), "sub_agent")
    assert result.final is not None and result.final.content == "The researcher says 42."
    [delegated] = [m for m in messages if isinstance(m, ToolMessage)]
    assert delegated.content == "Found: the answer is 42." and not delegated.is_error
    assert [m.role for m in child] == ["system", "user", "assistant"]
    assert child[1].content == "the answer"
    # the child's tokens are the parent's too: two parent calls and one child call
    assert child_result.usage.total_tokens == 15
    assert result.usage.total_tokens == 15 * 3
    assert result.spend["tool researcher"].usage.total_tokens == 15  # the child's, apart
    assert result.spend["scripted-model"].calls == 2
    tools = provider.requests[0].body["tools"]
    assert tools[0]["function"]["parameters"]["required"] == ["task"]


@asynccontextmanager
async def child_running(
    env: WorkflowEnvironment, task_queue: str
) -> AsyncIterator[tuple[AgentClient, str, Callable[[], Awaitable[Any]]]]:
    """A parent session whose child is in its (slow) model call: the client, the
    parent's id, and a check that gives the child's status once it has closed."""
    with ScriptedProvider(responder=model(slow_child=True)) as provider:
        spec = parent_spec(provider)
        async with running_worker(env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "ask the researcher")

            async def child_calling() -> bool:
                return len(provider.requests) >= 2

            async def child_closed() -> Any:
                run = (await agents.session(session).run_chain())[
                    :8
                ]  # the child's id is bound to it
                child = client.get_workflow_handle(f"{session}--researcher-t1c0-{run}")
                described = await child.describe()
                return described.status if described.close_time else None

            await wait_for(child_calling, timeout=30)
            yield agents, session, child_closed


async def test_cancelling_the_parents_turn_cancels_the_child(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with child_running(temporal_env, task_queue) as (agents, session, child_closed):
        await agents.session(session).cancel_turn(by="tester")
        status = await wait_for(child_closed, timeout=30)
        await wait_for(lambda: _idle(agents, session), timeout=30)
        messages = await agents.session(session).messages()
    assert status == WorkflowExecutionStatus.CANCELED
    [slot] = [m for m in messages if isinstance(m, ToolMessage)]
    assert slot.is_error and "turn cancelled by tester" in slot.content


async def _idle(agents: AgentClient, session: str) -> bool:
    return (await agents.session(session).status()).phase == "idle"


async def test_a_worker_killed_while_the_child_runs(
    temporal_env: WorkflowEnvironment, tmp_path: Any
) -> None:
    """SIGKILL the only worker mid child session: a fresh one takes over both sides and
    the parent ends with the array it would have had."""
    from tests.temporal.test_chaos import WorkerPool

    address = temporal_env.client.service_client.config.target_host
    pool = WorkerPool(address, "sub-kill", tmp_path / "ledger.txt", "memory:")
    with ScriptedProvider(responder=model(slow_child=True)) as provider:
        spec = parent_spec(
            provider, end_after_reply=True, heartbeat_timeout_seconds=KILL_HEARTBEAT_SECONDS
        )
        child = spec.agents[0].spec
        faster = child.model_copy(
            update={
                "session": child.session.model_copy(
                    update={"heartbeat_timeout_seconds": KILL_HEARTBEAT_SECONDS}
                )
            }
        )
        spec = spec.model_copy(
            update={"agents": [spec.agents[0].model_copy(update={"spec": faster})]}
        )
        await asyncio.to_thread(pool.start)
        try:
            agents = AgentClient(temporal_env.client, task_queue="sub-kill")
            session = await agents.start(spec, "ask the researcher")

            async def child_calling() -> bool:
                return len(provider.requests) >= 2

            await wait_for(child_calling, timeout=30)
            await asyncio.to_thread(pool.kill)
            result = await asyncio.wait_for(agents.session(session).result(), 120)
            messages = await agents.session(session).messages()
        finally:
            pool.stop()
    assert result.final is not None
    assert result.final.content == "The researcher says 42."
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].content == "Found: the answer is 42."
    assert len(provider.requests) == 4, "the child's interrupted call was made again, once"


async def test_ending_the_parent_cancels_a_running_child(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    async with child_running(temporal_env, task_queue) as (agents, session, child_closed):
        await agents.session(session).end(by="tester", reason="closing time")
        result = await asyncio.wait_for(agents.session(session).result(), 30)
        status = await wait_for(child_closed, timeout=30)  # it may take a moment
        messages = await agents.session(session).messages()
    assert result.status == "done" and result.stop_reason == "ended"
    # cancelled, and terminated by the parent-close policy if the parent closed first
    assert status in {WorkflowExecutionStatus.CANCELED, WorkflowExecutionStatus.TERMINATED}
    [slot] = [m for m in messages if isinstance(m, ToolMessage)]
    assert slot.is_error and "turn cancelled by tester: closing time" in slot.content


publishing = Registry()


@tool(registry=publishing, approval="always")
def publish(text: str) -> str:
    """Publish a finding (a person approves)."""
    return f"published: {text}"


async def test_a_childs_approval_shows_in_the_parent_and_is_decided_there(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    def answer(request: RecordedRequest) -> Any:
        messages = request.body["messages"]
        if messages[0] == {"role": "system", "content": RESEARCHER}:
            if any(m["role"] == "tool" for m in messages):
                return assistant_text("Published the finding.")
            return assistant_calls(("publish", {"text": "42"}))
        if any(m["role"] == "tool" for m in messages):
            return assistant_text("The researcher published it.")
        return assistant_calls(("researcher", {"task": "find and publish"}))

    with ScriptedProvider(responder=answer) as provider:
        child = spec_for(provider, ["publish"], instructions=RESEARCHER).model_dump()
        agents_spec = [{"name": "researcher", "description": "Researches", "spec": child}]
        spec = spec_for(provider, [], agents=agents_spec, session={"end_after_reply": True})
        async with running_worker(temporal_env, task_queue, publishing) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "research and publish")
            waiting = await agents.session(session).wait(timeout=30)  # as a person follows it
            assert waiting.kind == "approval"
            [pending] = waiting.pending
            run = (await agents.session(session).run_chain())[:8]
            assert pending.approval_id == f"researcher-t1c0-{run}/turn1-call0"
            assert pending.tool_name == "publish" and pending.arguments == '{"text": "42"}'
            await agents.session(session).approve(pending.approval_id, by="editor")
            result = await asyncio.wait_for(agents.session(session).result(), 30)
            child_messages = await agents.session(f"{session}--researcher-t1c0-{run}").messages()
            status = await agents.session(session).status()
    assert result.final is not None and result.final.content == "The researcher published it."
    [published] = [m for m in child_messages if isinstance(m, ToolMessage)]
    assert published.content == "published: 42"
    assert published.approval is not None and published.approval.by == "editor"
    assert status.pending_approvals == []


INPUTS = {
    "type": "object",
    "properties": {"topic": {"type": "string"}, "depth": {"type": "integer", "minimum": 1}},
    "required": ["topic", "depth"],
}


async def test_a_sub_agents_inputs_are_its_parameters_and_its_message(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """An agent with typed inputs: the child's input schema is the tool's parameters; arguments
    that do not match it are an error result the model reads (no child starts), ones
    that do are the child's message, as JSON."""

    def answer(request: RecordedRequest) -> Any:
        messages = request.body["messages"]
        if messages[0] == {"role": "system", "content": RESEARCHER}:
            return assistant_text("Tides follow the moon.")
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            return assistant_calls(("researcher", {"topic": "tides"}))  # depth missing
        if len(results) == 1:
            return assistant_calls(("researcher", {"topic": "tides", "depth": 2}))
        return assistant_text("done")

    with ScriptedProvider(responder=answer) as provider:
        child = spec_for(provider, [], instructions=RESEARCHER).model_dump()
        agents_section = [
            {"name": "researcher", "description": "Researches", "spec": child, "inputs": INPUTS}
        ]
        spec = spec_for(provider, [], agents=agents_section)
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "research tides")
            result = await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
    first = provider.bodies()[0]
    [tool] = first["tools"]
    assert tool["function"]["name"] == "researcher"
    assert tool["function"]["parameters"]["required"] == ["topic", "depth"]
    refused, answered = [m for m in messages if isinstance(m, ToolMessage)]
    assert "the agent's inputs" in refused.content and "depth" in refused.content
    assert answered.content == "Tides follow the moon."
    child_bodies = [b for b in provider.bodies() if b["messages"][0]["content"] == RESEARCHER]
    assert len(child_bodies) == 1  # the refused call started no child
    assert json.loads(child_bodies[0]["messages"][-1]["content"]) == {"depth": 2, "topic": "tides"}
    assert result.final is not None and result.final.content == "done"


def test_a_sub_agents_inputs_must_be_an_object_schema() -> None:
    child = {"model": {"name": "m"}}
    base = {"name": "r", "description": "d", "spec": child}
    with pytest.raises(ValidationError, match=r"type.*object"):
        SubAgentSpec.model_validate({**base, "inputs": {"type": "string"}})
    with pytest.raises(ValidationError, match="not a valid JSON Schema"):
        SubAgentSpec.model_validate({**base, "inputs": {"type": "object", "required": 3}})
    assert SubAgentSpec.model_validate({**base, "inputs": INPUTS}).inputs == INPUTS
