"""Rerunning recorded conversations against today's code: unchanged, every reply comes
from the recording and no model is asked, and no tool runs (each call is answered with
its recorded result); with ``run_tools`` and a tool that now answers otherwise, the run
departs where its result enters, the scripted fallback model answers from there, and
the report names the tool call whose argument changed; the CLI does the same for files
and folders of recordings and fails the run that departs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, UserMessage, dump_messages
from durable_agent.capabilities import Capabilities
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text, rerun
from durable_agent.testing._rerun import RecordedReplies
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.project.test_cli import acli, address_of
from tests.support import cli_tools
from tests.support.agent_harness import running_worker, spec_for


def clock(tokyo: str, ran: list[str] | None = None) -> Registry:
    """``get_time`` (Tokyo is ``tokyo``) and ``set_alarm``; each call is noted in ``ran``."""
    registry = Registry()
    ran = [] if ran is None else ran

    @tool(registry=registry)
    def get_time(city: str) -> str:
        """Local time in a city."""
        ran.append("get_time")
        return tokyo if city == "Tokyo" else "09:00"

    @tool(registry=registry)
    def set_alarm(at: str) -> str:
        """Set an alarm."""
        ran.append("set_alarm")
        return f"alarm set for {at}"

    return registry


def alarm_model(request: RecordedRequest) -> AssistantMessage:
    """Asks the time, sets the alarm at what the tool said, then confirms."""
    messages = request.body["messages"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if messages[-1]["role"] == "user":
        return assistant_calls(("get_time", {"city": "Tokyo"}))
    if len(results) % 2 == 1:
        return assistant_calls(("set_alarm", {"at": results[-1]}))
    return assistant_text(results[-1])


async def test_a_rerun_replays_the_recording_and_finds_a_changed_tool_argument(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider(responder=alarm_model) as provider:
        spec = spec_for(provider, ["get_time", "set_alarm"], session={})
        async with running_worker(temporal_env, task_queue, clock("22:00")) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "wake me at Tokyo time")
            await agents.session(session).wait(after=0, timeout=60)
            before = await agents.session(session).send("and again")
            await agents.session(session).wait(after=before, timeout=60)
            recorded = await agents.session(session).messages()
        assert len(recorded) == 12 and len(provider.requests) == 6
        asked = len(provider.requests)

        ran: list[str] = []
        same = await rerun(temporal_env.client, recorded, spec, registry=clock("22:00", ran))
        assert same.same, same.summary()
        assert (same.replayed, same.fresh) == (6, 0) and len(provider.requests) == asked
        # today's tool answers otherwise, but a rerun runs no tool: the recorded results
        unrun = await rerun(temporal_env.client, recorded, spec, registry=clock("23:00", ran))
        assert unrun.same, unrun.summary()
        assert ran == [], "no tool ran"

        fallback_asked: list[Any] = []

        def fallback(request: RecordedRequest) -> AssistantMessage:
            fallback_asked.append(request)
            return alarm_model(request)

        moved = await rerun(
            temporal_env.client,
            recorded,
            spec,
            registry=clock("23:00"),
            fallback=fallback,
            run_tools=True,
        )
        # live: where it departs, the spec's own model answers (a registered endpoint)
        with ScriptedProvider(responder=alarm_model) as live_model:
            endpoint = ProviderEndpoint(base_url=live_model.base_url, api_key_env=None)
            named = spec.model.model_copy(update={"endpoint": "live"})
            went_live = await rerun(
                temporal_env.client,
                recorded,
                spec.model_copy(update={"model": named}),
                registry=clock("23:00"),
                capabilities=Capabilities(models={"live": endpoint}),
                live=True,
                run_tools=True,
            )
        # (a model call retried after a lost worker asks again: distinct requests count)
        assert len({json.dumps(r.body["messages"]) for r in live_model.requests}) == 5
        assert went_live.fresh == 5
        assert went_live.changed_calls() == moved.changed_calls()
        assert len(provider.requests) == asked
    assert not moved.same
    assert moved.departures[0].request == 1 and moved.departures[0].message == 2
    assert moved.departures[0].recorded[1] == "22:00" and moved.departures[0].now[1] == "23:00"
    assert moved.diff.common == 2
    assert moved.changed_calls()[0] == (3, "set_alarm", {"at": "22:00"}, {"at": "23:00"})
    assert moved.replayed == 1 and moved.fresh == 5 == len(fallback_asked)
    assert "departs at message 2: recorded tool: 22:00, now tool: 23:00" in moved.summary()


def test_a_request_made_again_gets_the_same_answer_and_counts_once() -> None:
    """A model call retried after a lost worker sends its request twice: the fallback
    is asked once, the retry gets that answer, and the figures count it once."""
    recorded = [UserMessage(content="hi"), assistant_text("hello")]
    asked: list[Any] = []

    def fallback(request: RecordedRequest) -> AssistantMessage:
        asked.append(request)
        return assistant_text(f"answer {len(asked)}")

    replies = RecordedReplies(recorded, fallback)

    def request(*said: tuple[str, str]) -> RecordedRequest:
        body = {"messages": [{"role": role, "content": text} for role, text in said]}
        return RecordedRequest(method="POST", path="/v1/chat/completions", headers={}, body=body)

    assert replies(request(("user", "hi"))).content == "hello"
    first = replies(request(("user", "bye")))
    again = replies(request(("user", "bye")))
    other = replies(request(("user", "hi"), ("assistant", "hello"), ("user", "more")))
    assert (first.content, again.content, other.content) == ("answer 1", "answer 1", "answer 2")
    assert replies(request(("user", "hi"))).content == "hello"
    assert (replies.replayed, replies.fresh, replies.repeated, len(asked)) == (1, 2, 2, 2)
    assert [d.request for d in replies.departures] == [1, 2]


async def test_the_cli_reruns_files_and_folders_and_fails_what_departs(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    def model(request: RecordedRequest) -> AssistantMessage:
        messages = request.body["messages"]
        if messages[-1]["role"] == "user":
            return assistant_calls(("get_time", {"city": "Tokyo"}))
        return assistant_text(f"It is {messages[-1]['content']}.")

    with ScriptedProvider(responder=model) as provider:
        spec = spec_for(provider, ["get_time"], session={})
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(spec.model_dump_json())
        registry = Registry([cli_tools.get_time])
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "time in Tokyo?")
            await agents.session(session).wait(after=0, timeout=60)
            recorded = await agents.session(session).messages()
            address = address_of(temporal_env)
            shown = await acli("history", session, "--json", address=address)
            assert shown.returncode == 0, shown.stderr
        folder = tmp_path / "recordings"
        folder.mkdir()
        (folder / "tokyo.json").write_text(shown.stdout)
        altered = dump_messages(recorded)
        altered[2]["content"] = "21:00"  # a tool result today's code no longer gives
        (folder / "stale.json").write_text(json.dumps(altered))
        asked = len(provider.requests)
        common = ("--spec", str(spec_file), "--tools", "tests.support.cli_tools")
        one = await acli("replay", str(folder / "tokyo.json"), *common, address=address)
        assert one.returncode == 0, one.stderr
        assert "tokyo.json: same (2 replies from the recording)" in one.stdout
        # answered from the recordings, both agree with what they hold
        kept = await acli("replay", str(folder), *common, address=address)
        assert kept.returncode == 0, kept.stdout + kept.stderr
        # today's tool, run, no longer gives the stale recording's result
        both = await acli("replay", str(folder), *common, "--run-tools", address=address)
        assert len(provider.requests) == asked  # every reply came from the recordings
    assert both.returncode == 1, both.stderr
    assert "stale.json: departs at message 2: recorded tool: 21:00, now tool: 22:00" in (
        both.stdout
    )
    assert "1 of 2 recordings depart" in both.stdout
