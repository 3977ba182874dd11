"""The gateway's A2A door driven by the official SDK's client (``a2a-sdk``) over real
HTTP, against a real worker and dev server: the card, a send that waits for the
answer, a streamed send, reading and listing tasks, a call that waits for a person
(the task's ``input-required`` state, answered by a data part), cancelling a turn and
subscribing to it, a 0.3 client, push notifications refused, and another user's task
out of reach."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import PushNotificationNotSupportedError, TaskNotFoundError
from google.protobuf import json_format
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.gateway._a2a import agent_card
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.a2a_peers import a2a_client, data_message, events_of, state_name, text_message
from tests.support.agent_harness import spec_for
from tests.support.docs_page import run_page_block
from tests.support.gateway_harness import served
from tests.support.recording_server import RecordingServer

PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "a2a.md"
registry = Registry()
wiped: list[str] = []
released = threading.Event()


@tool(registry=registry, approval="always")
def wipe_cache(name: str) -> str:
    """Clear a cache (a person approves)."""
    wiped.append(name)
    return f"cache {name} cleared"


@tool(registry=registry)
def slow_report(name: str) -> str:
    """A report that takes a while."""
    released.wait(20)
    return f"report {name}"


def answer_of(task: pb.Task) -> str:
    return task.artifacts[-1].parts[0].text if task.artifacts else ""


async def test_the_sdk_client_reads_the_card_sends_streams_gets_and_lists(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [assistant_text("hello from the session"), assistant_text("and again")]
    with ScriptedProvider(script) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache"], registry, tmp_path
        ) as (client, base):
            async with a2a_client(base, streaming=False) as (plain, card):
                hi = text_message("hi", context_id="ctx-1")
                [sent] = await events_of(plain, hi)
                task = sent.task
                got = await plain.get_task(pb.GetTaskRequest(id="ctx-1"))
                [again] = await events_of(plain, hi)  # sent again: answered, not sent twice
            async with a2a_client(base) as (streamed, _):
                events = await events_of(streamed, text_message("more", context_id="ctx-1"))
                listed = await streamed.list_tasks(pb.ListTasksRequest(context_id="ctx-1"))
            session = "conversation-ctx-1"
            array = await AgentClient(client, task_queue=task_queue).session(session).messages()
    assert card.name == "agent" and card.capabilities.streaming
    assert not card.capabilities.push_notifications
    assert [s.id for s in card.skills] == ["wipe_cache"]
    assert "bearer" in card.security_schemes
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0", "0.3"}
    assert card.supported_interfaces[0].url == f"{base}/a2a"
    # a send that waits: the task is the conversation's session, answered
    assert task.id == "ctx-1" and task.context_id == "ctx-1"
    assert state_name(task.status.state) == "TASK_STATE_COMPLETED"
    assert answer_of(task) == "hello from the session"
    assert [m.role for m in got.history] == [pb.ROLE_USER, pb.ROLE_AGENT]
    assert got.history[0].parts[0].text == "hi"
    assert state_name(again.task.status.state) == "TASK_STATE_COMPLETED"
    assert answer_of(again.task) == "hello from the session"
    # streamed: the task, the answer as an artifact, the final state
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task" and kinds[-1] == "status_update", kinds
    assert "artifact_update" in kinds
    artifact = next(e.artifact_update for e in events if e.HasField("artifact_update"))
    assert artifact.artifact.parts[0].text == "and again"
    assert state_name(events[-1].status_update.status.state) == "TASK_STATE_COMPLETED"
    assert [t.id for t in listed.tasks] == ["ctx-1"]
    # the session holds both exchanges, each message once
    assert [m.role for m in array] == ["user", "assistant", "user", "assistant"]
    assert len(provider.requests) == 2


async def test_a_call_that_waits_is_input_required_and_a_data_part_approves_it(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    wiped.clear()
    script = [
        assistant_calls(("wipe_cache", {"name": "tiles"})),
        assistant_text("cleared"),
        assistant_text("the maps are fine"),
    ]
    with ScriptedProvider(script) as provider:
        async with (
            served(temporal_env, task_queue, provider, ["wipe_cache"], registry, tmp_path) as (
                _client,
                base,
            ),
            a2a_client(base) as (peer, _),
        ):
            first = await events_of(peer, text_message("clear tiles", context_id="c2"))
            waiting = first[-1].status_update.status
            ran_before = list(wiped)
            got = await peer.get_task(pb.GetTaskRequest(id="c2"))
            # words while the call waits: queued behind the decision, answered at once
            queued = await events_of(peer, text_message("and the maps?", task_id="c2"))
            second = await events_of(peer, data_message({"approved": True}, task_id="c2"))
    assert state_name(waiting.state) == "TASK_STATE_INPUT_REQUIRED"
    assert ran_before == [], "the tool waits for the decision"
    data = next(p.data for p in waiting.message.parts if p.HasField("data"))
    [approval] = data.struct_value.fields["approvals"].list_value.values
    assert approval.struct_value.fields["tool"].string_value == "wipe_cache"
    assert "approved" in waiting.message.parts[0].text
    assert state_name(got.status.state) == "TASK_STATE_INPUT_REQUIRED"
    [still] = queued
    assert state_name(still.task.status.state) == "TASK_STATE_INPUT_REQUIRED"
    assert wiped == ["tiles"]
    assert state_name(second[-1].status_update.status.state) == "TASK_STATE_COMPLETED"
    assert second[-1].status_update.status.message.parts[0].text == "cleared"
    # the queued words reached the model after the call's result, once
    roles = [(m["role"], m.get("content")) for m in provider.requests[1].body["messages"]]
    assert roles[-2][0] == "tool" and roles[-1] == ("user", "and the maps?")


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_turn_is_cancelled_and_a_subscriber_follows_it_to_its_end(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path, version: str
) -> None:
    """In both versions (0.3 spells them ``tasks/resubscribe`` and ``tasks/cancel``)."""
    released.clear()
    task_id = f"c3-{version}"  # one conversation per test: the dev server is shared
    script = [assistant_calls(("slow_report", {"name": "q3"})), assistant_text("never asked")]
    with ScriptedProvider(script) as provider:
        async with served(
            temporal_env, task_queue, provider, ["slow_report"], registry, tmp_path
        ) as (client, base):
            agents = AgentClient(client, task_queue=task_queue)
            async with a2a_client(base, version=version, streaming=False) as (peer, _):
                request = text_message("report q3", context_id=task_id)
                request.configuration.return_immediately = True
                [started] = await events_of(peer, request)
                handle = agents.session(f"conversation-{task_id}")
                for _ in range(200):
                    if (await handle.status()).phase == "running_tools":
                        break
                    await asyncio.sleep(0.05)
            async with a2a_client(base, version=version) as (streamed, _):
                subscribed = asyncio.Event()  # the subscriber has the task as it stands
                following = asyncio.create_task(
                    _collect(streamed.subscribe(pb.SubscribeToTaskRequest(id=task_id)), subscribed)
                )
                await asyncio.wait_for(subscribed.wait(), 30)
                cancelled = await streamed.cancel_task(pb.CancelTaskRequest(id=task_id))
                released.set()
                followed = await asyncio.wait_for(following, 30)
            for _ in range(200):
                if (await handle.status()).phase == "idle":
                    break
                await asyncio.sleep(0.05)
    assert state_name(started.task.status.state) in ("TASK_STATE_WORKING", "TASK_STATE_COMPLETED")
    assert state_name(cancelled.status.state) == "TASK_STATE_CANCELED"
    assert followed[0].HasField("task")
    assert state_name(followed[0].task.status.state) == "TASK_STATE_WORKING"
    assert followed[-1].HasField("status_update")
    assert len(provider.requests) == 1, "a cancelled turn asks the model nothing more"


async def _collect(stream: object, first: asyncio.Event | None = None) -> list[pb.StreamResponse]:
    """Every event of ``stream``; ``first`` is set once one has come."""
    got: list[pb.StreamResponse] = []
    async for event in stream:  # type: ignore[attr-defined]
        got.append(event)
        if first is not None:
            first.set()
    return got


async def test_a_0_3_client_sends_and_reads_its_task(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [assistant_text("old words, same answer"), assistant_text("streamed in 0.3")]
    with ScriptedProvider(script) as provider:
        async with (
            served(temporal_env, task_queue, provider, [], registry, tmp_path) as (_, base),
            a2a_client(base, version="0.3", streaming=False) as (old, _),
        ):
            [sent] = await events_of(old, text_message("hi", context_id="c4"))
            got = await old.get_task(pb.GetTaskRequest(id="c4"))
            async with a2a_client(base, version="0.3") as (streaming, _):
                events = await events_of(streaming, text_message("more", context_id="c4"))
    assert sent.task.id == "c4"
    assert state_name(got.status.state) == "TASK_STATE_COMPLETED"
    assert answer_of(got) == "old words, same answer"
    artifact = next(e.artifact_update for e in events if e.HasField("artifact_update"))
    assert artifact.artifact.parts[0].text == "streamed in 0.3"
    assert state_name(events[-1].status_update.status.state) == "TASK_STATE_COMPLETED"


async def test_push_notifications_are_refused_and_their_url_gets_no_request(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    with RecordingServer() as hook, ScriptedProvider([assistant_text("ok")]) as provider:
        async with (
            served(temporal_env, task_queue, provider, [], registry, tmp_path) as (_, base),
            a2a_client(base, streaming=False) as (peer, _),
        ):
            await events_of(peer, text_message("hi", context_id="c5"))
            config = pb.TaskPushNotificationConfig(task_id="c5", url=hook.url)
            with pytest.raises(PushNotificationNotSupportedError):
                await peer.create_task_push_notification_config(config)
    assert hook.seen == []


async def test_another_users_task_is_out_of_reach_of_every_method(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wiped.clear()
    alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
    monkeypatch.setenv("DURABLE_AGENT_GATEWAY_TOKENS", f"alice={alice},bob={bob}")
    script = [assistant_calls(("wipe_cache", {"name": "maps"}))]
    with ScriptedProvider(script) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache"], registry, tmp_path
        ) as (client, base):
            agents = AgentClient(client, task_queue=task_queue)
            session = "conversation-token~alice~shared"
            async with a2a_client(base, token=alice) as (as_alice, _):
                first = await events_of(as_alice, text_message("clear maps", context_id="shared"))
            before = await agents.session(session).status()
            refused: list[str] = []
            approve = {"approved": True}
            async with a2a_client(base, token=bob) as (as_bob, _):
                listed = await as_bob.list_tasks(pb.ListTasksRequest())
                attempts = {
                    "get": as_bob.get_task(pb.GetTaskRequest(id="shared")),
                    "cancel": as_bob.cancel_task(pb.CancelTaskRequest(id="shared")),
                    "subscribe": _collect(as_bob.subscribe(pb.SubscribeToTaskRequest(id="shared"))),
                    "approve": events_of(as_bob, data_message(approve, task_id="shared")),
                    "send": events_of(as_bob, text_message("wipe it all", task_id="shared")),
                }
                for name, attempt in attempts.items():
                    try:
                        await attempt
                    except TaskNotFoundError:
                        refused.append(name)
            after = await agents.session(session).status()
            bobs = await agents.sessions(limit=100)
    assert state_name(first[-1].status_update.status.state) == "TASK_STATE_INPUT_REQUIRED"
    assert list(listed.tasks) == []
    assert refused == ["get", "cancel", "subscribe", "approve", "send"]
    assert wiped == [], "bob's answer decided nothing"
    assert after.message_count == before.message_count and after.phase == "awaiting_approval"
    assert [p.approval_id for p in after.pending_approvals] == [
        p.approval_id for p in before.pending_approvals
    ]
    assert not [s for s in bobs if s.owner == "token:bob"], "bob started nothing"
    assert len(provider.requests) == 1


async def test_the_pages_client_asks_the_served_agent(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    program = run_page_block("### Calling it with the official client", page=PAGE)
    with ScriptedProvider([assistant_text("the answer, streamed")]) as provider:
        async with served(temporal_env, task_queue, provider, [], registry, tmp_path) as (_, base):
            said = await program["ask"](base, "a question")
    assert said == "the answer, streamed"
    assert provider.requests[0].body["messages"][-1]["content"] == "a question"


def test_the_card_never_quotes_the_agents_instructions() -> None:
    with ScriptedProvider([]) as provider:
        spec = spec_for(provider, ["wipe_cache"], instructions="The vault code is 4711.")
    card = json_format.MessageToJson(agent_card(spec, "vault", "http://127.0.0.1:1/a2a/vault"))
    assert "4711" not in card and "vault code" not in card
    assert '"wipe_cache"' in card
