"""Messages other than a person's, mid-session (``commitSystemMessage``
and ``commitAssistantMessage``): a program adds a system notice or an assistant message
by update (``SessionHandle.inject``, ``durable-agent inject``) or signal; it joins the
array at the next checkpoint, never inside a tool batch, starts no turn, and the next
request carries it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client.results import MessageRefusedError
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, SystemMessage, ToolCall
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import running_worker, spec_for, wait_for

registry = Registry()
OPEN = threading.Event()


@tool(registry=registry)
def wait_for_gate(name: str) -> str:
    """Block until the test opens the gate (a barrier, not a clock)."""
    OPEN.wait(60)
    return f"gate {name} passed"


async def count_is(agents: AgentClient, session: str, count: int) -> bool:
    return len(await agents.session(session).messages()) == count


async def test_a_notice_while_idle_joins_at_once_and_reaches_the_next_request(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("hello"), assistant_text("noted")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider, session={}), "hi")
            await agents.session(sid).wait(timeout=30)
            await agents.session(sid).inject(
                SystemMessage(content="The user is a premium customer.")
            )
            await wait_for(lambda: count_is(agents, sid, 3))  # no turn: no model call
            assert len(provider.requests) == 1
            handle = client.get_workflow_handle(sid)
            await handle.signal("inject_message", AssistantMessage(content="(noted by a bot)"))
            await wait_for(lambda: count_is(agents, sid, 4))
            shown = await acli(
                "inject", sid, "Prices changed today.", address=address_of(temporal_env)
            )
            await wait_for(lambda: count_is(agents, sid, 5))
            index = await agents.session(sid).send("what do you know?")
            await agents.session(sid).wait(after=index, timeout=30)
            messages = await agents.session(sid).messages()
            await agents.session(sid).end()
    assert shown.returncode == 0, shown.stderr
    roles = [(m.role, m.mode) for m in messages]
    assert roles[:5] == [
        ("user", "user"),
        ("assistant", None),
        ("system", "tool"),
        ("assistant", "tool"),
        ("system", "tool"),
    ]
    assert all(m.timestamp is not None for m in messages[2:5])  # type: ignore[union-attr]
    sent = provider.bodies()[1]["messages"]
    assert [m["content"] for m in sent[-4:]] == [
        "The user is a premium customer.",
        "(noted by a bot)",
        "Prices changed today.",
        "what do you know?",
    ]


async def test_one_sent_during_a_batch_waits_for_its_results(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Pairing holds: the notice joins after the batch's results, before the next call."""
    OPEN.clear()
    script = [assistant_calls(("wait_for_gate", {"name": "a"})), assistant_text("through")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider, ["wait_for_gate"], session={}), "go")

            async def running() -> bool:
                return (await agents.session(sid).status()).phase == "running_tools"

            await wait_for(running)
            await agents.session(sid).inject(SystemMessage(content="The gate is slow today."))
            assert len(await agents.session(sid).messages()) == 2, "not inside the batch"
            OPEN.set()
            await agents.session(sid).wait(after=1, timeout=30)
            messages = await agents.session(sid).messages()
            await agents.session(sid).end()
    assert [m.role for m in messages] == ["user", "assistant", "tool", "system", "assistant"]
    second = provider.bodies()[1]["messages"]
    assert [m["role"] for m in second[-3:]] == ["assistant", "tool", "system"]


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (SystemMessage(content="  "), "empty message"),
        (
            AssistantMessage(
                content="",
                tool_calls=[
                    ToolCall.model_validate(
                        {"id": "c1", "function": {"name": "wait_for_gate", "arguments": "{}"}}
                    )
                ],
            ),
            "would have no results",
        ),
    ],
)
async def test_what_cannot_be_added_is_refused_and_nothing_changes(
    temporal_env: WorkflowEnvironment, task_queue: str, message: Any, why: str
) -> None:
    with ScriptedProvider([assistant_text("hello")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider, session={}), "hi")
            await agents.session(sid).wait(timeout=30)
            with pytest.raises(MessageRefusedError, match=why):
                await agents.session(sid).inject(message)
            messages = await agents.session(sid).messages()
            await agents.session(sid).end()
    assert [m.role for m in messages] == ["user", "assistant"]
