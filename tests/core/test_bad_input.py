"""Bad input at every entry point: a bad start fails at once naming each field; bad signals
change nothing, are visible in `status`, and lose nothing that was good."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowFailureError
from temporalio.common import RawValue
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.support.agent_harness import running_worker, spec_for, temporal_cli

registry = Registry()


@tool(registry=registry)
def noop() -> str:
    """Do nothing."""
    return "done"


def raw_json(data: bytes) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data))


@pytest.mark.parametrize(
    ("spec_change", "named"),
    [
        ({"colour": "blue"}, "spec.colour: Extra inputs are not permitted"),
        ({"stop": {"max_turns": -3}}, "spec.stop.max_turns: Input should be greater than"),
        ({"tool_execution": 7}, "spec.tool_execution: Input should be 'parallel' or"),
        ({"session": {"idle_timeout_seconds": "soon"}}, "spec.session.idle_timeout_seconds"),
        ({"tools": ["noop", "launch_rockets"]}, "no worker has loaded: launch_rockets"),
        (
            {"swarm": {"agents": [{"name": "triage"}, {"name": "triage"}]}},
            "swarm.agents: 'triage' is the name of two agents",
        ),
        (
            {"swarm": {"agents": [{"name": "triage"}], "default_agent": "boss"}},
            "swarm.default_agent: 'boss' is not among swarm.agents (triage)",
        ),
    ],
    ids=[
        "unknown field",
        "negative limit",
        "wrong type",
        "wrong type nested",
        "unknown tool",
        "two agents of one name",
        "unknown default agent",
    ],
)
async def test_a_bad_spec_from_the_temporal_cli_fails_the_start_naming_the_field(
    temporal_env: WorkflowEnvironment, task_queue: str, spec_change: dict[str, object], named: str
) -> None:
    with ScriptedProvider() as provider:
        spec = spec_for(provider, ["noop"]).model_dump(mode="json")
        request = {"spec": {**spec, **spec_change}, "message": "hi"}
        async with running_worker(temporal_env, task_queue, registry) as client:
            sid = f"bad-{task_queue}"
            await asyncio.to_thread(
                temporal_cli,
                temporal_env,
                "workflow",
                "start",
                "--type",
                "AgentWorkflow",
                "--task-queue",
                task_queue,
                "--workflow-id",
                sid,
                "--input",
                json.dumps(request),
            )
            with pytest.raises(WorkflowFailureError) as failure:
                await asyncio.wait_for(client.get_workflow_handle(sid).result(), 20)
    assert named in str(failure.value.cause)
    assert provider.requests == []


async def test_bad_signals_change_nothing_visibly_and_lose_nothing(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    tricky = "tabs\tand\nnewlines, a bell \x07, a NUL \x00 and \u202e right-to-left"
    script = [assistant_text("hello"), assistant_text("welcome"), assistant_text("still here")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider, session={}), "hi")
            await agents.session(sid).wait(timeout=20)
            handle = client.get_workflow_handle(sid)
            await handle.signal("approve", raw_json(b'{"bogus": 1}'))
            await handle.signal("deny", raw_json(b"\xff\xfe not json"))
            await handle.signal("send_message", raw_json(b'"\xff\xfe invalid utf-8"'))
            await handle.signal("send_message", raw_json(b"12345"))
            await handle.signal("end_session", raw_json(b'["nonsense"]'))
            status = await agents.session(sid).status()
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
        async with running_worker(temporal_env, f"{task_queue}-2", registry) as client:
            agents = AgentClient(client, task_queue=f"{task_queue}-2")
            sid2 = await agents.start(spec_for(provider, session={}), "first")
            await agents.session(sid2).wait(timeout=20)
            cursor = await agents.session(sid2).send(tricky)
            reply = await agents.session(sid2).wait(after=cursor, timeout=20)
            await agents.session(sid2).end()
    rejected = status.rejected_signals
    assert len(rejected) == 5, rejected
    assert rejected[0].startswith("approved: unreadable signal (approval_id: Field required")
    assert rejected[1].startswith("denied: unreadable signal (")
    assert rejected[2].startswith("send_message: unreadable message (")
    assert rejected[3].startswith("send_message: unreadable message (")
    assert (
        rejected[4].startswith("end_session: unreadable signal (")
        and "ending anyway" in rejected[4]
    )
    assert result.stop_reason == "ended" and [m.content for m in messages] == ["hi", "hello"]
    # control characters are text: delivered to the model exactly, and answered
    assert reply.reply and reply.reply.content == "still here"
    assert provider.requests[-1].body["messages"][-1]["content"] == tricky
