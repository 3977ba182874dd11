"""A message of more tool calls than one page reaches the workflow a page per workflow
task: the model's reply, and the page read back after continue-as-new that holds it.
The calls run, wait for people and pair with their results as if it came whole."""

from __future__ import annotations

import json
from typing import Any

import pytest
from durable_agent._activities.model import ModelActivities
from durable_agent._activities.transcript_store import TranscriptStore
from durable_agent._workflows import transcript_sync as reply_pages
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._cli.trace import read_timeline
from durable_agent._contracts.boundary import AgentResult, ReplyCallsInput
from durable_agent._errors import Failure
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import FunctionCall, Message, ToolCall, ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import record_history, running_worker, spec_for, wait_for
from tests.support.histories import activity_inputs, activity_results

WORDS = ["one", "two", "three", "four", "five", "six", "seven"]
#: Results this long put the array over the smallest payload budget: it is carried to
#: the next run by reference and read back in pages.
LOUDER = 400

paged = Registry()
plain = Registry()


@tool(registry=plain)
def echo(word: str) -> str:
    """Say it back."""
    return word


@tool(registry=paged, approval="always")
def shout(word: str) -> str:
    """Say it louder, at length (once a person agrees)."""
    return word.upper() * LOUDER


async def test_a_reply_of_more_calls_than_a_page_is_read_a_page_per_task(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seven calls in pages of three: the reply brings three and the count, two more
    activities bring the rest; all seven wait for a person, run, and pair in request
    order. After continue-as-new the page read back that holds the reply is cut the same
    way, and the model sees the whole array again."""
    monkeypatch.setattr(reply_pages, "CALLS_PER_PAGE", 3)
    script = [
        assistant_calls(*[("shout", {"word": w}) for w in WORDS]),
        assistant_text("first"),
        assistant_text("second"),
    ]
    with ScriptedProvider(script) as provider:
        session = {"continue_as_new_after_events": 20, "payload_budget_bytes": 10_000}
        spec = spec_for(provider, ["shout"], session=session)
        async with running_worker(temporal_env, task_queue, paged) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "go")
            first_run = (await agents.temporal.get_workflow_handle(sid).describe()).run_id
            pending = await wait_for(lambda: _all_waiting(agents, sid), timeout=60)
            for each in pending:  # one person's decision each: every one has a span
                await agents.session(sid).approve(each.approval_id, by="ana")
            answered = [each.approval_id for each in pending]
            assert (await agents.session(sid).wait(answered=answered, timeout=60)).kind == "reply"
            await wait_for(lambda: _runs_past(agents, sid, 1), timeout=60)
            second_run = (await agents.temporal.get_workflow_handle(sid).describe()).run_id
            index = await agents.session(sid).send("again")
            await agents.session(sid).wait(after=index, timeout=60)
            timeline = await read_timeline(agents, sid)
            await agents.session(sid).end()
            first = client.get_workflow_handle(sid, run_id=first_run)
            second = client.get_workflow_handle(sid, run_id=second_run)
            await record_history(first, "tool_calls_in_pages")
            await record_history(second, "tool_calls_in_pages_continued")
            histories = [await first.fetch_history(), await second.fetch_history()]
    assert [p.slot for p in pending] == list(range(7))
    assert [json.loads(p.arguments)["word"] for p in pending] == WORDS

    # the reply came with three of its calls and their count; the rest in two pages
    [returned] = activity_results(histories[0], "call_model")[:1]
    assert len(returned["message"]["tool_calls"]) == 3 and returned["calls"] == 7
    assert returned["arguments_checked"] is True  # the workflow parses none of them
    pages = [(p["start"], p["stop"]) for p in activity_inputs(histories[0], "reply_calls")]
    assert pages == [(3, 6), (6, 7)]
    # after continue-as-new, the page that holds the reply ends at it, cut the same way
    loaded = activity_results(histories[1], "load_transcript")
    [cut] = [page for page in loaded if page.get("calls") is not None]
    assert cut["calls"] == 7 and len(cut["messages"][-1]["tool_calls"]) == 3
    assert sum(len(page["messages"]) for page in loaded) == 10 and len(loaded) > 2
    assert [(p["start"], p["stop"]) for p in activity_inputs(histories[1], "reply_calls")] == pages

    # the model saw every call, and every result in request order, in both runs
    bodies = provider.bodies()
    assert len(bodies) == 3
    for body in bodies[1:]:
        [reply] = [m for m in body["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
        words = [json.loads(c["function"]["arguments"])["word"] for c in reply["tool_calls"]]
        ids = [c["id"] for c in reply["tool_calls"]]
        results = [m for m in body["messages"] if m["role"] == "tool"]
        assert words == WORDS
        assert [m["tool_call_id"] for m in results] == ids
        assert [m["content"] for m in results] == [w.upper() * LOUDER for w in WORDS]
    # the trace counts all seven calls, and a person's wait for each
    [paged_call] = [s for s in timeline.of("model") if s.detail.endswith("tool calls")]
    assert paged_call.detail == "7 tool calls"
    approvals = timeline.of("approval")
    assert sorted(s.label for s in approvals) == ["shout"] * 7
    assert all("approved by ana" in s.detail for s in approvals)


async def test_a_broken_call_in_a_later_page_is_still_found_and_rescued(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker vouches for a paged reply's arguments only when every call's are a JSON
    object; the fourth call's are not, in the second page: the workflow parses them
    itself, runs the others, and asks the model again (rescue ``correct``)."""
    monkeypatch.setattr(reply_pages, "CALLS_PER_PAGE", 3)
    broken = ToolCall(id="call_9", function=FunctionCall(name="echo", arguments='{"word": '))
    good: list[tuple[str, dict[str, Any]] | ToolCall] = [("echo", {"word": w}) for w in WORDS[:3]]
    script = [assistant_calls(*good, broken), assistant_text("fixed")]
    provider, result, messages, history = await _echo_session(temporal_env, task_queue, script)
    [paged_reply, _] = activity_results(history, "call_model")
    assert paged_reply["calls"] == 4 and "arguments_checked" not in paged_reply
    assert result.status == "done" and result.final and result.final.content == "fixed"
    echoed = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.content for m in echoed[:3]] == WORDS[:3]
    assert "not valid JSON" in echoed[3].content and echoed[3].is_error
    assert [m.role for m in messages].count("resque") == 1
    assert "call are not valid JSON" in json.dumps(provider.bodies()[1]["messages"])


async def test_a_tool_that_does_not_exist_in_a_later_page_is_still_found_and_rescued(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker vouches for every call's arguments, and the workflow learns the tools
    called one page per workflow task; the fifth call, in the second page, names a tool the session
    does not have: the reply is found unusable as it would be whole, and nothing runs
    under that name."""
    monkeypatch.setattr(reply_pages, "CALLS_PER_PAGE", 3)
    calls: list[tuple[str, dict[str, Any]] | ToolCall] = [("echo", {"word": w}) for w in WORDS[:4]]
    calls.append(("erase", {"word": "all"}))
    script = [assistant_calls(*calls), assistant_text("fixed")]
    provider, result, messages, history = await _echo_session(temporal_env, task_queue, script)
    [paged_reply, _] = activity_results(history, "call_model")
    assert paged_reply["calls"] == 5 and paged_reply["arguments_checked"] is True
    assert result.status == "done" and result.final and result.final.content == "fixed"
    assert [m.role for m in messages].count("resque") == 1
    assert "a tool that does not exist: erase" in json.dumps(provider.bodies()[1]["messages"])
    ran = [json.loads(i["arguments"]) for i in activity_inputs(history, "run_tool")]
    assert {"word": "all"} not in ran, ran


async def _echo_session(
    temporal_env: WorkflowEnvironment, task_queue: str, script: list[Any]
) -> tuple[ScriptedProvider, AgentResult, list[Message], Any]:
    """A one-reply session of ``echo`` answered by ``script``: its provider, result,
    messages and history."""
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["echo"], session={"end_after_reply": True})
        async with running_worker(temporal_env, task_queue, plain) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "go")
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
            history = await agents.temporal.get_workflow_handle(sid).fetch_history()
    return provider, result, messages, history


class LosesTheFirstReply(TranscriptStore):
    """A workers' store that loses everything just as the first reply in pages is read
    (a ``memory:`` store whose worker restarted, a store pruned or wiped)."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[str] = []

    async def load_message(self, key: str) -> Message | None:
        if not self.lost:
            self.lost.append(key)
            self.forget()
        return await super().load_message(key)


async def test_a_reply_the_store_lost_before_its_pages_were_read_is_asked_again(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing of it joins the array (history holds only its first page); its tokens
    count, and the model, asked again, answers a batch that runs once."""
    monkeypatch.setattr(reply_pages, "CALLS_PER_PAGE", 3)
    batch = assistant_calls(*[("echo", {"word": w}) for w in WORDS])
    script = [batch, batch, assistant_text("done")]
    store = LosesTheFirstReply()
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["echo"], session={"end_after_reply": True})
        async with running_worker(temporal_env, task_queue, plain, transcripts=store) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "go")
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    assert len(store.lost) == 1
    assert result.status == "done" and result.final and result.final.content == "done"
    first, again, _ = provider.bodies()
    assert first["messages"] == again["messages"]  # the same question, asked again
    echoed = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert echoed == WORDS  # one batch ran, once
    assert [m.role for m in messages].count("assistant") == 2
    # three replies billed, the lost one too (the scripted model bills 15 tokens a reply)
    assert result.usage.total_tokens == 3 * 15


async def test_the_rest_of_a_message_the_store_lacks_is_an_error_the_workflow_knows() -> None:
    """A store that lost the message (a ``memory:`` store whose worker restarted) says so
    with the error the workflow answers, not with a short page."""
    activities = ModelActivities()
    message = assistant_calls(("shout", {"word": "a"}), ("shout", {"word": "b"}))
    key = await activities.transcripts.put_message(message)
    kept = await ActivityEnvironment().run(
        activities.reply_calls, ReplyCallsInput(key=key, start=1, stop=2)
    )
    assert message.tool_calls is not None and kept == message.tool_calls[1:]
    with pytest.raises(ApplicationError) as lost:
        await ActivityEnvironment().run(
            activities.reply_calls, ReplyCallsInput(key="v" + "0" * 31, start=0, stop=1)
        )
    assert lost.value.type == Failure.TRANSCRIPT_UNKNOWN and lost.value.non_retryable
    answer = ToolMessage(tool_call_id="c", content="x")
    with pytest.raises(ApplicationError):  # a message without calls has no pages
        await ActivityEnvironment().run(
            activities.reply_calls,
            ReplyCallsInput(key=await activities.transcripts.put_message(answer), start=0, stop=1),
        )


async def _all_waiting(agents: AgentClient, sid: str) -> Any:
    pending = await agents.session(sid).pending_approvals()
    return pending if len(pending) == len(WORDS) else None


async def _runs_past(agents: AgentClient, sid: str, runs: int) -> bool | None:
    return True if (await agents.session(sid).status()).runs > runs else None
