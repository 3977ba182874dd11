"""Sessions that live on: multi-turn, queued messages, ending, idle timeout,
continue-as-new, and approvals that outlast runs and workers. Driven through
AgentClient and the real `temporal` CLI, as the manual says."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, Message
from durable_agent._client.results import MessageRefusedError
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import UserMessage, dump_messages, image_part, text_part
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import (
    record_history,
    running_worker,
    spec_for,
    temporal_cli,
    tool_messages,
    wait_for,
)

registry = Registry()


#: Set by a test that must send messages while a lookup is still running.
lookup_may_finish = asyncio.Event()
lookup_may_finish.set()


@tool(registry=registry)
async def lookup(key: str) -> str:
    """Look a key up (slowly enough for messages to arrive meanwhile)."""
    await asyncio.sleep(0.4)
    await lookup_may_finish.wait()
    return f"value of {key}"


@tool(registry=registry, approval="always")
def deploy(service: str) -> str:
    """Deploy a service (a person approves)."""
    return f"deployed {service}"


def session_spec(provider: ScriptedProvider, **session: Any) -> Any:
    return spec_for(provider, ["lookup", "deploy"], session=session)


async def test_a_session_answers_many_messages_on_one_array(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("lookup", {"key": "a"})),
        assistant_text("a is known"),
        assistant_text("second answer"),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(session_spec(provider), "what is a?")
            first = await agents.session(sid).wait(timeout=20)
            assert first.kind == "reply" and first.reply and first.reply.content == "a is known"
            cursor = len(await agents.session(sid).messages())
            # the next message comes from the real CLI, as an operator would send it
            await asyncio.to_thread(
                temporal_cli,
                temporal_env,
                "workflow",
                "signal",
                "--workflow-id",
                sid,
                "--name",
                "send_message",
                "--input",
                json.dumps("and then?"),
            )
            second = await agents.session(sid).wait(after=cursor, timeout=20)
            await asyncio.to_thread(
                temporal_cli,
                temporal_env,
                "workflow",
                "signal",
                "--workflow-id",
                sid,
                "--name",
                "end_session",
            )
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
        await record_history(agents.temporal.get_workflow_handle(sid), "multi_turn_session")
    assert [m.role for m in second.messages] == ["user", "assistant"]
    assert second.reply and second.reply.content == "second answer"
    assert result.status == "done" and result.stop_reason == "ended"
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    # the provider saw one growing conversation
    assert [m["role"] for m in provider.requests[2].body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


async def test_messages_sent_during_a_turn_arrive_at_the_boundary_in_order(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_calls(("lookup", {"key": "k"})), assistant_text("answered all three")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            lookup_may_finish.clear()  # the batch runs until all three are sent
            try:
                sid = await agents.start(session_spec(provider, end_after_reply=True), "start")
                await wait_for(lambda: _phase_is(agents, sid, "running_tools"))
                for text in ("m1", "m2", "m3"):
                    await agents.session(sid).send(text)
                queued = await wait_for(lambda: _queued(agents, sid, 3))  # signals land
            finally:
                lookup_may_finish.set()
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
        await record_history(agents.temporal.get_workflow_handle(sid), "queued_message")
    assert queued == 3
    assert result.final and result.final.content == "answered all three"
    assert [(m.role, m.content) for m in messages[2:6]] == [
        ("tool", "value of k"),
        ("user", "m1"),
        ("user", "m2"),
        ("user", "m3"),
    ]
    sent = provider.requests[1].body["messages"]
    assert [m["content"] for m in sent[-3:]] == ["m1", "m2", "m3"]


async def _queued(agents: AgentClient, sid: str, count: int) -> int:
    queued = (await agents.session(sid).status()).queued_messages
    return queued if queued == count else 0


async def _phase_is(agents: AgentClient, sid: str, phase: str) -> bool:
    return (await agents.session(sid).status()).phase == phase


async def test_bad_messages_are_rejected_visibly_and_lose_nothing(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("hi"), assistant_text("ok")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(session_spec(provider, max_message_chars=10), "hello")
            await agents.session(sid).wait(timeout=20)
            refused = []
            for text in ("", "x" * 11):  # the update entry point: refused to the caller at once
                with pytest.raises(MessageRefusedError) as caught:
                    await agents.session(sid).send(text)
                refused.append(caught.value.reason)
            # text parts count (an image does not): 6 + 5 characters
            parts = [
                text_part("x" * 6),
                image_part("https://example.com/a.png"),
                text_part("y" * 5),
            ]
            with pytest.raises(MessageRefusedError) as caught:
                await agents.session(sid).send(UserMessage(content=parts))
            refused.append(caught.value.reason)
            await client.get_workflow_handle(sid).signal("send_message", "y" * 12)  # a signal
            long_parts = UserMessage(content=[text_part("z" * 13)])
            await client.get_workflow_handle(sid).signal("send_message", long_parts)
            with pytest.raises(AssertionError) as by_cli:  # the update from the temporal CLI
                await asyncio.to_thread(
                    temporal_cli,
                    temporal_env,
                    "workflow",
                    "update",
                    "execute",
                    "--workflow-id",
                    sid,
                    "--name",
                    "send_message",
                    "--input",
                    '""',
                )
            cursor = await agents.session(sid).send("ten chars!")
            reply = await agents.session(sid).wait(after=cursor, timeout=20)
            status = await agents.session(sid).status()
            await agents.session(sid).end()
            await agents.session(sid).result()
            await record_history(client.get_workflow_handle(sid), "message_parts_counted")
    assert reply.reply and reply.reply.content == "ok"
    assert "send_message: empty message" in str(by_cli.value)
    assert refused == [
        "send_message: empty message",
        "send_message: 11 characters is over the limit of 10",
        "send_message: 11 characters is over the limit of 10",
    ]
    # a signal cannot answer: what it changed nothing with is listed in status
    assert status.rejected_signals == [
        "send_message: 12 characters is over the limit of 10",
        "send_message: 13 characters is over the limit of 10",
    ]


async def test_idle_timeout_ends_a_quiet_session(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("hello")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(session_spec(provider, idle_timeout_seconds=1), "hi")
            result = await agents.session(sid).result()
    assert result.stop_reason == "idle_timeout" and result.status == "done"
    assert result.final and result.final.content == "hello"


def _without_timestamps(messages: list[Message]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if k != "timestamp"} for m in dump_messages(messages)]


CONVERSATION = [
    (
        "find a and b",
        [
            assistant_calls(("lookup", {"key": "a"}), ("lookup", {"key": "b"})),
            assistant_calls(("lookup", {"key": "c"})),
            assistant_text("a, b and c"),
        ],
    ),
    ("now d", [assistant_calls(("lookup", {"key": "d"})), assistant_text("d found")]),
    ("thanks", [assistant_text("you are welcome")]),
]


async def _converse(
    env: WorkflowEnvironment, task_queue: str, session: dict[str, Any], name: str | None
) -> tuple[list[Message], Any, int]:
    script = [reply for _, replies in CONVERSATION for reply in replies]
    with ScriptedProvider(script) as provider:
        async with running_worker(env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(session_spec(provider, **session), CONVERSATION[0][0])
            first_run = agents.temporal.get_workflow_handle(sid)
            described = await first_run.describe()
            await agents.session(sid).wait(timeout=30)
            for text, _ in CONVERSATION[1:]:
                cursor = await agents.session(sid).send(text)
                await agents.session(sid).wait(after=cursor, timeout=30)
            status = await agents.session(sid).status()
            await agents.session(sid).end()
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
        if name:
            run = client.get_workflow_handle(sid, run_id=described.run_id)
            await record_history(run, name)
    return messages, result, status.runs


async def test_continue_as_new_keeps_the_conversation_identical(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    plain, plain_result, plain_runs = await _converse(temporal_env, task_queue, {}, None)
    continued, result, runs = await _converse(
        temporal_env, task_queue, {"continue_as_new_after_events": 20}, "continue_as_new"
    )
    assert plain_runs == 1
    assert runs >= 4, f"expected at least 3 continue-as-new cycles, got {runs - 1}"
    assert _without_timestamps(continued) == _without_timestamps(plain)
    assert len(continued) == 13
    assert result.turns == plain_result.turns == 6
    assert result.usage == plain_result.usage


async def test_pending_approval_survives_continue_as_new_and_a_worker_restart(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_calls(("deploy", {"service": "api"})), assistant_text("api deployed")]
    with ScriptedProvider(script) as provider:
        spec = session_spec(provider, end_after_reply=True, continue_as_new_after_events=20)
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "ship it")
            first_run = await agents.temporal.get_workflow_handle(sid).describe()
            waiting = await agents.session(sid).wait(timeout=20)
            assert waiting.kind == "approval"
            # a flood of signals that change nothing grows history past the limit
            for k in range(4):
                await agents.temporal.get_workflow_handle(sid).signal(
                    "approve", {"approval_id": f"bogus-{k}"}
                )
            # the next run waits again once it has started (admitted, its tools resolved)
            status = await wait_for(lambda: _runs_at_least(agents, sid, 2, "awaiting_approval"))
            assert [p.approval_id for p in status.pending_approvals] == ["turn1-call0"]
            run = client.get_workflow_handle(sid, run_id=first_run.run_id)
            await record_history(run, "approval_continued_as_new")
        # the worker is gone; a new one takes over and the decision still lands
        async with running_worker(temporal_env, task_queue, registry):
            await agents.session(sid).approve("turn1-call0", by="release-manager")
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    assert result.final and result.final.content == "api deployed"
    (deployed,) = tool_messages(messages)
    assert deployed.content == "deployed api"
    assert deployed.approval and deployed.approval.by == "release-manager"
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]


async def _runs_at_least(agents: AgentClient, sid: str, runs: int, phase: str | None = None) -> Any:
    status = await agents.session(sid).status()
    return status if status.runs >= runs and phase in (None, status.phase) else None


async def test_ending_a_session_denies_what_waits_for_approval(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_calls(("deploy", {"service": "db"}))]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(session_spec(provider), "ship db")
            await agents.session(sid).wait(timeout=20)
            await agents.session(sid).end(by="oncall", reason="change freeze")
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    assert result.stop_reason == "ended"
    (denied,) = tool_messages(messages)
    assert denied.is_error and denied.content == "Tool call denied by oncall: change freeze"
    assert len(provider.requests) == 1
