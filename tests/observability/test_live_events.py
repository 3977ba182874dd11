"""The live event stream, read with ``SessionHandle.follow`` over the real server: what a
session publishes, in order, at offsets that only grow (across continue-as-new too);
text streamed before the reply lands; a lost attempt's text voided; resuming from an
offset; deltas off; a terminated session still ends the stream."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from durable_agent._activities import live_deltas
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.events import LiveEvent
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, ToolMessage, UserMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import chat_stream_events, sse_reply
from tests.support import cli_tools
from tests.support.agent_harness import (
    KILL_HEARTBEAT_SECONDS,
    record_history,
    running_worker,
    spec_for,
    wait_for,
)
from tests.temporal.test_chaos import WorkerPool

registry = Registry([cli_tools.get_time, cli_tools.wipe_cache])
ANSWER = "It is 09:00 in New York; the tiles cache is cleared, as you asked me to do."


def paced(message: AssistantMessage, delay: float = 0.03) -> Any:
    return sse_reply(chat_stream_events(message), delay=delay)


async def collect(agents: AgentClient, session: str, after: int = -1) -> list[LiveEvent]:
    return [e async for e in agents.session(session).follow(after=after)]


def kinds(events: list[LiveEvent]) -> list[str]:
    return [e.type for e in events]


def text_of(events: list[LiveEvent]) -> str:
    """What a reader shows: deltas since the last model start or attempt restart, or the
    reply's own text when it came with none (a reply streamed whole before its first
    delta was due sends none)."""
    shown: list[str] = []
    for event in events:
        if event.type in ("model_started", "attempt_restarted"):
            shown = []
        elif event.type == "text_delta":
            shown.append(event.text)
        elif event.type == "message_appended" and isinstance(event.message, AssistantMessage):
            shown = shown or [event.message.content]
    return "".join(shown)


async def test_a_session_publishes_its_turn_in_order_with_text_streamed_before_the_reply(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Also: a call whose reply has no text (tool calls alone) makes no publisher; the
    answer's call makes one, and its deltas reach the reader through it."""
    made: list[str] = []  # the activity type of each call that made a publisher
    make = WorkflowStreamClient.from_within_activity

    def counted(cls: type[WorkflowStreamClient], /, **options: Any) -> WorkflowStreamClient:
        made.append(activity.info().activity_type)
        return make(**options)

    monkeypatch.setattr(WorkflowStreamClient, "from_within_activity", classmethod(counted))
    # the answer's stream stops half way until the reader has shown some of its text
    shown = threading.Event()
    answer = paced(assistant_text(ANSWER, reasoning="first the time, then the cache"), 0.01)
    held = dataclasses.replace(answer, hold=shown, hold_after=len(answer.chunks) // 2)
    script = [assistant_calls(("get_time", {"city": "NYC"})), held]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec_for(provider, ["get_time"]), "time in NYC?")
            seen: list[tuple[int, LiveEvent]] = []  # with the chunks the provider had sent
            async for event in agents.session(session).follow():
                seen.append((len(provider.sent), event))
                if event.type == "text_delta":
                    shown.set()
            events = [e for _, e in seen]
            resumed = await collect(agents, session, after=events[5].offset)
            await record_history(client.get_workflow_handle(session), "live_events")
            assert await agents.session(session).latest_offset() == events[-1].offset
    assert [e.offset for e in events] == list(range(len(events))), "offsets 0, 1, 2, ..."
    assert resumed == events[6:], "a reader resumes right after the offset it saw"
    assert made == ["call_model"], "one publisher: the answer's call, not the tool call's"
    order = kinds(events)
    assert order[:5] == [
        "message_appended",  # the user's message
        "turn_started",
        "model_started",
        "message_appended",  # the tool call
        "usage",
    ], order
    assert order[5:7] == ["tool_started", "tool_finished"], order
    finished = events[6]
    assert finished.type == "tool_finished" and finished.name == "get_time"
    assert not finished.error and isinstance(finished.duration_ms, int)  # carried, not judged
    assert "reasoning_delta" in order and order.count("text_delta") >= 2, order
    assert order[-3:] == ["message_appended", "usage", "ended"], order
    assert text_of(events) == ANSWER
    reasoning = "".join(e.text for e in events if e.type == "reasoning_delta")
    assert reasoning == "first the time, then the cache"
    # the text was on screen before the reply was whole: by order (a barrier), not by clock
    first_delta = next(sent for sent, e in seen if e.type == "text_delta")
    assert first_delta < len(provider.sent), (first_delta, len(provider.sent))
    appended = [e for e in events if e.type == "message_appended"]
    assert [e.index for e in appended] == [0, 1, 2, 3]
    assert isinstance(appended[0].message, UserMessage)
    assert isinstance(appended[2].message, ToolMessage)
    assert appended[3].message is not None and appended[3].message.content == ANSWER
    ended = events[-1]
    assert ended.type == "ended" and ended.result is not None and ended.result.status == "done"


async def test_a_reply_streamed_whole_before_its_first_delta_was_due_sends_no_signal(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first delta waits a moment for more; a reply that ended by then publishes no
    delta, so the call sends the session no signal (no event, no workflow task): its text
    is in the reply's own event. The wait is made long here, so a loaded machine cannot
    stretch the stream past it; the streamed test above keeps the default."""
    monkeypatch.setattr(live_deltas, "FIRST_DELTA_AFTER_SECONDS", 5.0)
    with ScriptedProvider([sse_reply(chat_stream_events(assistant_text(ANSWER)))]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = spec_for(provider, session={"end_after_reply": True})
            session = await agents.start(spec, "hi")
            events = await collect(agents, session)
            history = await client.get_workflow_handle(session).fetch_history()
    assert len(provider.requests) == 1 and provider.requests[0].body["stream"] is True
    assert kinds(events) == [
        "message_appended",
        "turn_started",
        "model_started",
        "message_appended",
        "usage",
        "ended",
    ]
    assert text_of(events) == ANSWER, "the reply's own event carries the text"
    signals = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    ]
    assert signals == [], signals


async def test_deltas_off_publish_every_other_event_and_no_text(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([paced(assistant_text(ANSWER))]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = spec_for(provider, session={"end_after_reply": True, "live_deltas": False})
            events = await collect(agents, await agents.start(spec, "hi"))
    assert "text_delta" not in kinds(events)
    assert kinds(events) == [
        "message_appended",
        "turn_started",
        "model_started",
        "message_appended",
        "usage",
        "ended",
    ]


async def test_offsets_go_on_across_continue_as_new_and_idle_is_announced(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    replies = [paced(assistant_text(f"answer {n}"), 0.0) for n in range(6)]
    with ScriptedProvider(replies) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = spec_for(provider, session={"continue_as_new_after_events": 20})
            session = await agents.start(spec, "question 0")
            for n in range(1, 6):
                await agents.session(session).wait(after=2 * n - 1, timeout=60)
                await agents.session(session).send(f"question {n}")
            await agents.session(session).wait(after=11, timeout=60)
            status = await agents.session(session).status()
            await agents.session(session).end()
            events = await collect(agents, session)
            await record_history(client.get_workflow_handle(session), "live_events_continued")
    assert status.runs > 1, "the session continued as new"
    assert [e.offset for e in events] == list(range(len(events)))
    idles = [e for e in events if e.type == "idle"]
    assert [i.message_count for i in idles][-1] == 12
    texts = [e.message.content for e in events if e.type == "message_appended" and e.message]
    assert texts == [t for n in range(6) for t in (f"question {n}", f"answer {n}")]
    assert events[-1].type == "ended"


async def test_a_lost_attempt_is_voided_so_a_reader_never_shows_text_twice(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """The worker is SIGKILLed mid-stream; the next attempt says it restarted, and the
    text a reader shows is the answer once. The first stream stops halfway at a barrier
    until the kill (a paced stream could end first on a loaded machine)."""
    address = temporal_env.client.service_client.config.target_host
    agents = AgentClient(temporal_env.client, task_queue="live-kill")
    pool = WorkerPool(address, agents.task_queue, tmp_path / "ledger", "memory:")
    killed = threading.Event()
    halfway = dataclasses.replace(paced(assistant_text(ANSWER), 0.0), hold=killed, hold_after=3)
    answer = paced(assistant_text(ANSWER), 0.0)
    with ScriptedProvider([halfway, answer, answer]) as provider:  # a spare: see below
        spec = spec_for(
            provider,
            session={"end_after_reply": True, "heartbeat_timeout_seconds": KILL_HEARTBEAT_SECONDS},
        )
        await asyncio.to_thread(pool.start)
        try:
            session = await agents.start(spec, "time?")
            events: list[LiveEvent] = []
            reader = asyncio.ensure_future(_into(agents.session(session).follow(), events))
            await wait_for(lambda: _true(kinds(events).count("text_delta") >= 1), timeout=60)
            await asyncio.to_thread(pool.kill)
            killed.set()  # the stream goes on to a worker that is no longer there
            await asyncio.wait_for(reader, 120)
        finally:
            killed.set()
            pool.stop()
    # one restart for the kill; on a machine loaded past its cores (two copies of the
    # suite on two cores) a second attempt has missed its heartbeats too, and each
    # restart must say so, in order
    restarts = [e for e in events if e.type == "attempt_restarted"]
    assert [e.attempt for e in restarts] == list(range(2, 2 + len(restarts))) != [], kinds(events)
    restart = restarts[0]
    before = [e for e in events if e.type == "text_delta" and e.offset < restart.offset]
    assert before, "text was shown before the kill"
    assert text_of(events) == ANSWER, "shown once, from the attempt that finished"
    assert events[-1].type == "ended"


async def test_a_terminated_session_ends_its_followers(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("hello")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec_for(provider, session={}), "hi")
            await agents.session(session).wait(after=1, timeout=30)
            events: list[LiveEvent] = []
            reader = asyncio.ensure_future(_into(agents.session(session).follow(), events))
            await wait_for(lambda: _true("idle" in kinds(events)), timeout=30)
            await client.get_workflow_handle(session).terminate("test")
            await asyncio.wait_for(reader, 30)
    ended = events[-1]
    assert ended.type == "ended" and ended.result is None and ended.error


async def _into(stream: Any, sink: list[LiveEvent]) -> None:
    async for event in stream:
        sink.append(event)


async def _true(value: bool) -> bool:
    return value


async def test_the_log_is_bounded_and_a_reader_behind_it_is_told_what_it_missed(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A session started with 40 messages of 30 KB publishes 1.2 MB of events; the next
    turn trims the log to half its 1 MB bound, so a reader from the start gets a gap
    first, then the newest events; the ``messages`` query still has everything."""
    big = [
        UserMessage(content=f"{n} " + "x" * 30_000)
        if n % 2 == 0
        else AssistantMessage(content=f"{n} " + "y" * 30_000)
        for n in range(40)
    ]
    with ScriptedProvider([assistant_text("short")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec_for(provider), "and now?", history=big)
            events = await collect(agents, session)
            messages = await agents.session(session).messages()
    assert events[0].type == "gap" and events[0].missed > 0, events[0]
    kept = events[1:]
    assert kept[0].offset == events[0].missed, "offsets go on where the gap ends"
    assert [e.offset for e in kept] == list(range(kept[0].offset, kept[0].offset + len(kept)))
    shown = [e.index for e in kept if e.type == "message_appended"]
    assert shown and shown[-1] == len(messages) - 1 == 41
    assert messages[0].content.startswith("0 x") and len(messages) == 42
    assert kept[-1].type == "ended"


@tool
def page(n: int) -> str:
    """A page of 5,000 characters."""
    return f"{n} " + "z" * 5_000


async def test_a_turn_of_many_calls_trims_the_log_before_the_turn_ends(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """One turn of two batches of 300 calls with 5 KB results logs over 3 MB of events
    in about 1,600: the log is looked at every 1,000 events the loop publishes, not only
    when a turn starts, so a reader from the start of this one-turn session is told of a
    gap, then reads the newest events up to the end, offsets without a hole."""
    batch = assistant_calls(*[("page", {"n": n}) for n in range(300)])
    script = [batch, batch, assistant_text("ok")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, Registry([page])) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = {"end_after_reply": True, "max_concurrent_tool_calls": 50}
            spec = spec_for(provider, ["page"], session=session)
            sid = await agents.start(spec, "read them all")
            result = await agents.session(sid).result()
            events = await collect(agents, sid)
    assert result.status == "done", result
    assert events[0].type == "gap" and events[0].missed > 0, events[0]
    kept = events[1:]
    assert [e.offset for e in kept] == list(range(events[0].missed, events[0].missed + len(kept)))
    finished = [e.slot for e in kept if e.type == "tool_finished"]
    assert 300 <= len(finished) < 600, "the first batch's oldest events went"
    assert sorted(finished[-300:]) == list(range(300)), "the second batch's are all kept"
    assert kept[-1].type == "ended"


async def test_the_loops_own_steps_are_events_and_a_tool_finished_carries_its_result(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A rescue, a flush and a cancelled turn each publish their event, after the
    message that records them; ``tool_finished`` carries the result's text."""
    released = threading.Event()
    held = dataclasses.replace(paced(assistant_text("never shown")), hold=released)
    script = [
        assistant_calls(("get_time", {"city": "NYC"})),
        assistant_text("  \n"),  # an empty answer: rescued (correct)
        assistant_text(ANSWER),
        held,  # the next turn's call waits until cancelled
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = spec_for(provider, ["get_time"], session={})
            session = await agents.start(spec, "time in NYC?")
            await agents.session(session).wait(timeout=30)
            await agents.session(session).flush(by="ops", reason="new topic")
            await agents.session(session).send("and now?")
            await wait_for(lambda: _calling(agents, session))
            await agents.session(session).cancel_turn(by="ops", reason="too slow")
            released.set()
            await wait_for(lambda: _idle_after_cancel(agents, session))
            await agents.session(session).end()
            events = [e async for e in agents.session(session).follow()]
    order = kinds(events)
    finished = next(e for e in events if e.type == "tool_finished")
    assert finished.result is not None and finished.result.startswith("09:")
    rescued = next(e for e in events if e.type == "rescued")
    assert rescued.strategy == "correct" and rescued.reason == "its answer was empty"
    resque_at = next(
        i
        for i, e in enumerate(events)
        if e.type == "message_appended" and e.message is not None and e.message.role == "resque"
    )
    assert order[resque_at + 1] == "rescued", "right after the message that records it"
    flushed = next(e for e in events if e.type == "flushed")
    assert flushed.by == "ops" and flushed.reason == "new topic"
    ended = next(e for e in events if e.type == "turn_ended")
    assert ended.reason == "cancelled" and "too slow" in ended.error
    assert order.index("flushed") < order.index("turn_ended") < order.index("ended")


async def _calling(agents: AgentClient, session: str) -> bool:
    return (await agents.session(session).status()).phase == "calling_model"


async def _idle_after_cancel(agents: AgentClient, session: str) -> bool:
    status = await agents.session(session).status()
    return status.phase == "idle" and status.last_error is not None
