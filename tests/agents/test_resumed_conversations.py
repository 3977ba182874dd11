"""A conversation outlives its session: once a session has ended (``end``, an idle
timeout, a failure), ``converse`` and ``start(resume=True)`` go on with its array in a
new run under the same id. The worker reads the array back from the ended run itself,
and the new run gets it by reference (its start input stays small). ``start`` without
``resume`` refuses clearly. A runaway turn and a model that fails for good end the
turn, not the session, unless the spec says so. The clients give a read 60 s, not
15: beside a second copy of the suite a new run reading an ended run's array back
answered a query later than 15 s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client.results import SessionExistsError
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import error_reply
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import record_history, running_worker, spec_for
from tests.support.gateway_harness import gateway, read_sse

registry = Registry()
RAN: list[str] = []


@tool(registry=registry)
def look_up(term: str) -> str:
    """Look a term up."""
    RAN.append(term)
    return f"{term}: found"


def contents(messages: list[Any]) -> list[tuple[str, Any]]:
    return [(m.role, m.content) for m in messages]


async def started_input(client: Client, session_id: str, run_id: str) -> bytes:
    handle = client.get_workflow_handle(session_id, run_id=run_id)
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            attrs = event.workflow_execution_started_event_attributes
            return b"".join(p.data for p in attrs.input.payloads)
    raise AssertionError("no start event")


async def activity_names(client: Client, session_id: str, run_id: str) -> list[str]:
    handle = client.get_workflow_handle(session_id, run_id=run_id)
    names = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            names.append(event.activity_task_scheduled_event_attributes.activity_type.name)
    return names


async def test_an_ended_conversation_goes_on_by_converse_with_its_array_by_reference(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("look_up", {"term": "oslo"})),
        assistant_text("Oslo is in Norway"),
        assistant_text("It has about 700,000 people"),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue, query_timeout=60)
            spec = spec_for(provider, ["look_up"], instructions="Be brief.", session={})
            sid = "resume-by-converse"
            sent = await agents.converse(sid, "where is oslo?", spec, owner="ana")
            await agents.session(sid).wait(after=sent.before, timeout=60)
            first_run = (await client.get_workflow_handle(sid).describe()).run_id
            before_end = await agents.session(sid).messages()
            old_offset = await agents.session(sid).latest_offset()
            await agents.session(sid).end(by="ana")
            ended = await agents.session(sid).result()
            sent = await agents.converse(sid, "how many people live there?", spec)
            outcome = await agents.session(sid).wait(after=sent.before, timeout=60)
            second_run = (await client.get_workflow_handle(sid).describe()).run_id
            after = await agents.session(sid).messages()
            events = [e async for e in _events_until_idle(agents, sid, old_offset)]
            owner = await agents.session(sid).owner()
            start_input = await started_input(client, sid, second_run)
            scheduled = await activity_names(client, sid, second_run)
            await agents.session(sid).end()
            await record_history(client.get_workflow_handle(sid), "resumed_conversation")
    assert ended.stop_reason == "ended" and ended.events_offset is not None
    assert second_run != first_run
    assert sent.before == len(before_end)  # counted from the array read back
    assert contents(after[: len(before_end)]) == contents(before_end)
    assert contents(after[len(before_end) :]) == [
        ("user", "how many people live there?"),
        ("assistant", "It has about 700,000 people"),
    ]
    assert outcome.kind == "reply"
    assert [m["content"] for m in provider.bodies()[2]["messages"]][:2] == [
        "Be brief.",
        "where is oslo?",
    ]
    assert len(provider.bodies()[2]["messages"]) == len(after) - 1
    assert owner == "ana"  # the ended run's owner went on
    # the array came back through the worker, not in the start input
    assert b"Oslo is in Norway" not in start_input and b"where is oslo" not in start_input
    assert "closed_conversation" in scheduled and "load_transcript" in scheduled
    # live events' offsets go on past the ended run's
    assert events and min(e.offset for e in events) > old_offset
    assert RAN == ["oslo"]  # nothing ran again


async def _events_until_idle(agents: AgentClient, sid: str, after: int) -> Any:
    async for event in agents.session(sid).follow(after=after):
        yield event
        if event.type == "idle":
            return


async def test_start_refuses_an_ended_session_unless_asked_to_resume_it(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_text("first"), assistant_text("second")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue, query_timeout=60)
            spec = spec_for(provider, session={"idle_timeout_seconds": 1})
            sid = await agents.start(spec, "one")
            first = await agents.session(sid).result()  # the idle timeout ends it
            with pytest.raises(SessionExistsError):
                await agents.start(spec, "two", session_id=sid)
            with pytest.raises(ValueError, match="resume"):
                await agents.start(spec, "two", session_id=sid, resume=True, restart=True)
            await agents.start(spec, "two", session_id=sid, resume=True)
            second = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    assert first.stop_reason == second.stop_reason == "idle_timeout"
    assert contents(messages) == [
        ("user", "one"),
        ("assistant", "first"),
        ("user", "two"),
        ("assistant", "second"),
    ]


async def test_a_failed_run_goes_on_too_and_a_running_one_is_not_resumed(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A session that failed (its model refused for good, with ``end_session_on``) has no
    usable result: the worker still reads its array back by query."""
    bad = error_reply(400, "bad request")
    script = [bad, assistant_text("recovered")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue, query_timeout=60)
            spec = spec_for(provider, session={}, stop={"end_session_on": ["model_error"]})
            sid = await agents.start(spec, "hello")
            failed = await agents.session(sid).result()
            sent = await agents.converse(sid, "again?", spec)
            await agents.session(sid).wait(after=sent.before, timeout=60)
            with pytest.raises(SessionExistsError):
                await agents.start(spec, session_id=sid, resume=True)  # it runs
            messages = await agents.session(sid).messages()
            await agents.session(sid).end()
    assert failed.status == "failed" and failed.stop_reason == "error"
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[1].is_error and messages[-1].content == "recovered"  # type: ignore[union-attr]
    # the error reply is not sent to the model again
    assert [m["role"] for m in provider.bodies()[-1]["messages"]] == ["user", "user"]


async def test_a_runaway_turn_ends_the_turn_and_the_session_answers_the_next_message(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    RAN.clear()
    script = [
        assistant_calls(("look_up", {"term": "a"})),
        assistant_calls(("look_up", {"term": "b"})),
        assistant_text("done at last"),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue, query_timeout=60)
            spec = spec_for(provider, ["look_up"], session={}, stop={"max_turns": 2})
            sid = await agents.start(spec, "loop")
            outcome = await agents.session(sid).wait(timeout=60)
            status = await agents.session(sid).status()
            index = await agents.session(sid).send("please finish")
            answer = await agents.session(sid).wait(after=index, timeout=60)
            ended = [e async for e in _turn_ends(agents, sid)]
            await agents.session(sid).end()
            result = await agents.session(sid).result()
            await record_history(client.get_workflow_handle(sid), "runaway_turn_ended")
    assert outcome.kind == "reply" and status.phase == "idle"
    assert status.last_error == "Agent loop exceeded 2 iterations"
    assert RAN == ["a", "b"]
    assert answer.kind == "reply" and answer.messages[-1].content == "done at last"
    assert [(e.reason, e.error) for e in ended] == [
        ("max_turns", "Agent loop exceeded 2 iterations")
    ]
    assert result.status == "done" and result.stop_reason == "ended"


async def _turn_ends(agents: AgentClient, sid: str) -> Any:
    async for event in agents.session(sid).follow():
        if event.type == "turn_ended":
            yield event
        if event.type == "idle" and event.message_count >= 7:
            return


@pytest.mark.parametrize("ends", [False, True])
async def test_a_permanent_provider_error_ends_the_turn_unless_the_spec_ends_the_session(
    temporal_env: WorkflowEnvironment, task_queue: str, ends: bool
) -> None:
    bad = error_reply(400, "context too long")
    with ScriptedProvider([bad, assistant_text("shorter now")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue, query_timeout=60)
            stop = {"end_session_on": ["model_error"]} if ends else {}
            sid = await agents.start(spec_for(provider, session={}, stop=stop), "long text")
            first = await agents.session(sid).wait(timeout=60)
            if not ends:
                index = await agents.session(sid).send("short text")
                second = await agents.session(sid).wait(after=index, timeout=60)
                await agents.session(sid).end()
            result = await agents.session(sid).result()
    requests = len(provider.requests)
    if ends:
        assert first.kind == "ended" and result.status == "failed"
        assert result.stop_reason == "error" and "context too long" in (result.error or "")
        assert requests == 1
    else:
        assert first.kind == "reply" and "context too long" in str(first.status)
        assert second.messages[-1].content == "shorter now"
        assert result.status == "done" and requests == 2
    assert json.dumps(provider.bodies()[0]["messages"]).count("long text") == 1


async def test_the_gateway_goes_on_with_a_conversation_whose_session_ended(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The conversation endpoint and AG-UI (whose thread is the conversation) both."""
    script = [assistant_text("hello there"), assistant_text("still here"), assistant_text("3")]
    with ScriptedProvider(script) as provider:
        path = tmp_path / "spec.json"
        path.write_text(spec_for(provider, session={}).model_dump_json())
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue, query_timeout=60)
            address = str(temporal_env.client.service_client.config.target_host)
            with gateway(address, task_queue, path) as base:
                async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                    thread = f"thread-{task_queue}"
                    sid = f"conversation-{thread}"
                    url = f"/api/conversations/{thread}/messages"
                    first = await http.post(url, json={"text": "hi"})
                    await agents.session(sid).wait(after=first.json()["before"], timeout=60)
                    await http.post(f"/api/sessions/{sid}/end", json={})
                    await agents.session(sid).result()
                    second = await http.post(url, json={"text": "again"})
                    await agents.session(sid).wait(after=second.json()["before"], timeout=60)
                    await http.post(f"/api/sessions/{sid}/end", json={})
                    await agents.session(sid).result()
                    run = {
                        "threadId": thread,
                        "runId": "run-3",
                        "state": {},
                        "tools": [],
                        "context": [],
                        "forwardedProps": {},
                        "messages": [{"id": "u3", "role": "user", "content": "third"}],
                    }
                    async with http.stream("POST", "/api/agui", json=run) as response:
                        assert response.status_code == 200, await response.aread()
                        agui = [e async for e in read_sse(response)]
            messages = await agents.session(sid).messages()
            await agents.session(sid).end()
    assert second.status_code == 202 and second.json()["before"] == 2
    text = "".join(e.data["delta"] for e in agui if e.data["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "3" and agui[-1].data["type"] == "RUN_FINISHED"
    assert contents(messages) == [
        ("user", "hi"),
        ("assistant", "hello there"),
        ("user", "again"),
        ("assistant", "still here"),
        ("user", "third"),
        ("assistant", "3"),
    ]
    assert [m["content"] for m in provider.bodies()[2]["messages"]] == [
        "hi",
        "hello there",
        "again",
        "still here",
        "third",
    ]


async def test_the_cli_refuses_an_ended_session_id_then_resumes_it(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [assistant_text("Paris"), assistant_text("About 2 million")]
    with ScriptedProvider(script) as provider:
        path = tmp_path / "spec.json"
        path.write_text(spec_for(provider).model_dump_json())
        common = ("--spec", str(path), "--task-queue", task_queue, "--session-id", "cli-resume")
        address = address_of(temporal_env)
        async with running_worker(temporal_env, task_queue, registry) as client:
            first = await acli("run", *common, "capital of France?", address=address)
            refused = await acli("run", *common, "how many people?", address=address)
            resumed = await acli("run", *common, "--resume", "how many people?", address=address)
            both = await acli("run", *common, "--resume", "--restart", "x", address=address)
            reader = AgentClient(client, task_queue=task_queue, query_timeout=60)
            messages = await reader.session("cli-resume").messages()
    assert first.returncode == 0 and resumed.returncode == 0, resumed.stderr
    assert refused.returncode == 2 and "--resume" in refused.stderr
    assert both.returncode == 2 and "not allowed with" in both.stderr
    assert "About 2 million" in resumed.stdout
    assert contents(messages) == [
        ("user", "capital of France?"),
        ("assistant", "Paris"),
        ("user", "how many people?"),
        ("assistant", "About 2 million"),
    ]
    assert len(provider.bodies()[1]["messages"]) == 3
