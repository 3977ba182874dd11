"""Wake-ups on the real dev server: the model sets them with its tools, a starter from
Python; each fires once per due time, as a message marked as a wake-up that starts a
turn, whether it falls due while the session sleeps, mid-turn or while an approval
waits, across continue-as-new and a worker's restart. Short delays (a few seconds);
order is proved by events (messages, requests, history), never by durations."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client.handle import SessionHandle
from durable_agent._contracts.wake_ups import WAKE_UP_SOURCE, epoch
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, Message, UserMessage
from durable_agent.capabilities import Capabilities
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import Reply, chat_stream_events
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import (
    record_history,
    running_worker,
    spec_for,
    timer_durations,
    wait_for,
)

registry = Registry()
WAKE_UPS = {"kind": "wake_ups", "name": "wake_ups"}
#: A worker whose shortest interval lets a test repeat every second.
QUICK = Capabilities.development(wake_ups={"min_interval_seconds": 1})


@tool(registry=registry, approval="always")
def deploy(service: str) -> str:
    """Deploy a service (a person approves)."""
    return f"deployed {service}"


def wake_up_spec(provider: ScriptedProvider, tools: list[str] | None = None, **kw: Any) -> Any:
    kw.setdefault("session", {"end_after_reply": False})
    return spec_for(provider, tools or [], toolsets=[WAKE_UPS], **kw)


def woken(messages: list[Message]) -> list[UserMessage]:
    return [m for m in messages if isinstance(m, UserMessage) and m.source == WAKE_UP_SOURCE]


async def said(session: SessionHandle, text: str, times: int = 1) -> list[Message]:
    """The array once the assistant has said ``text`` ``times`` times."""

    async def check() -> list[Message] | None:
        messages = await session.messages()
        count = sum(1 for m in messages if isinstance(m, AssistantMessage) and m.content == text)
        return messages if count >= times else None

    found: list[Message] = await wait_for(check, timeout=60)
    return found


def slow(text: str, seconds: float) -> Reply:
    chunks = [
        f"data: {json.dumps(e)}\n\n".encode() for e in chat_stream_events(assistant_text(text))
    ]
    return Reply(sse=True, chunks=(*chunks, b"data: [DONE]\n\n"), delay=seconds / len(chunks))


async def test_the_model_sets_a_wake_up_after_a_delay_and_it_fires_once_as_a_wake_up(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("wake_ups_set", {"text": "check the build", "after_seconds": 1})),
        assistant_text("I will check the build in a second."),
        assistant_text("The build is green."),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(wake_up_spec(provider), "watch it"))
            messages = await said(session, "The build is green.")
            [wake] = woken(messages)
            assert isinstance(wake.content, str)
            assert wake.content.endswith("] check the build")
            assert "not a message from the user" in wake.content
            assert wake.mode == "tool"
            assert messages.index(wake) == len(messages) - 2, "the wake-up started the turn"
            assert await session.wake_ups() == []
            assert len(provider.requests) == 3
            await record_history(client.get_workflow_handle(session.id), "wake_up_by_the_model")


async def test_a_starter_sets_one_at_a_time_and_the_agent_wakes_at_it(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_text("Noted."), assistant_text("Good morning!")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(wake_up_spec(provider), "hello"))
            await said(session, "Noted.")
            at = datetime.now(UTC) + timedelta(seconds=1)
            made = await session.wake_up("say good morning", at=at)
            assert made.id == "w1" and made.set_by == "starter"
            assert made.due == int(at.timestamp() * 1000)
            assert [w.id for w in (await session.status()).wake_ups] == ["w1"]
            messages = await said(session, "Good morning!")
            [wake] = woken(messages)
            assert wake.payload == {"wake_up": "w1", "due": made.due}
            assert "set by the session's starter" in str(wake.content)
            assert await session.wake_ups() == []
            await record_history(client.get_workflow_handle(session.id), "wake_up_by_a_starter")


async def test_a_repeating_wake_up_fires_once_per_due_time_until_cancelled(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_text("Noted."), *[assistant_text("tick") for _ in range(3)]]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry, capabilities=QUICK) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(wake_up_spec(provider), "hello"))
            await said(session, "Noted.")
            made = await session.wake_up("tick", every=timedelta(seconds=1))
            await said(session, "tick", times=3)
            await session.cancel_wake_up(made.id)
            messages = await session.messages()
            fired = woken(messages)
            dues = [m.payload["due"] for m in fired]
            assert len(fired) == 3 and dues == sorted(set(dues)), "each due time fired once"
            assert [b - a for a, b in itertools.pairwise(dues)] == [1000, 1000]
            assert await session.wake_ups() == []
            assert len(provider.requests) == 4


async def test_a_cron_rule_in_a_zone_falls_due_at_its_local_time(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("Noted.")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(wake_up_spec(provider), "hello"))
            await said(session, "Noted.")
            before = datetime.now(UTC)
            made = await session.wake_up(
                "the weekly report", cron="30 9 * * mon", timezone="Australia/Sydney"
            )
            after = datetime.now(UTC)
            sydney = ZoneInfo("Australia/Sydney")
            due = datetime.fromtimestamp(made.due / 1000, UTC).astimezone(sydney)
            assert (due.weekday(), due.hour, due.minute) == (0, 9, 30), "Monday 9:30 in Sydney"
            assert before < due <= after + timedelta(days=7)
            # the session sleeps on one durable timer, from its task's time to the due time
            handle = client.get_workflow_handle(session.id)

            async def timed() -> list[timedelta]:
                return [t for t in await timer_durations(handle) if t > timedelta(hours=1)]

            [timer] = await wait_for(timed)
            set_at = await time_of_task_that_started_the_timer(handle)
            assert made.due - round(timer / timedelta(milliseconds=1)) == epoch(set_at)


async def time_of_task_that_started_the_timer(handle: WorkflowHandle[Any, Any]) -> datetime:
    """The workflow time of the task that started the session's last timer: its
    ``WorkflowTaskStarted`` event's time, as the history records it."""
    started: datetime | None = None
    found: datetime | None = None
    for event in (await handle.fetch_history()).events:
        if event.HasField("workflow_task_started_event_attributes"):
            started = event.event_time.ToDatetime(tzinfo=UTC)
        if event.HasField("timer_started_event_attributes"):
            found = started
    assert found is not None
    return found


async def test_one_due_during_a_turn_waits_for_the_turn_and_fires_once(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [slow("a long answer", 3), assistant_text("Woken.")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(wake_up_spec(provider), "go on"))
            await wait_for(lambda: _true(len(provider.requests) == 1))
            await session.wake_up("wake", after=timedelta(milliseconds=200))
            messages = await said(session, "Woken.")
            texts = [m.content for m in messages if isinstance(m, AssistantMessage)]
            assert texts == ["a long answer", "Woken."]
            assert len(woken(messages)) == 1
            assert messages.index(woken(messages)[0]) > texts.index("a long answer")
            assert len(provider.requests) == 2


async def test_one_due_while_an_approval_waits_is_queued_and_fires_once(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("deploy", {"service": "api"})),
        assistant_text("Deployed."),
        assistant_text("Woken."),
    ]
    with ScriptedProvider(script) as provider:
        spec = wake_up_spec(provider, ["deploy"])
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(spec, "deploy the api"))
            [pending] = await wait_for(session.pending_approvals)
            made = await session.wake_up("wake", after=timedelta(milliseconds=100))

            async def passed() -> bool:  # workflow time went past the due time
                return datetime.now(UTC).timestamp() * 1000 > made.due + 500

            await wait_for(passed)
            assert [w.id for w in await session.wake_ups()] == ["w1"], "held, not fired"
            assert woken(await session.messages()) == []
            await session.approve(pending.approval_id, by="ops")
            messages = await said(session, "Woken.")
            assert len(woken(messages)) == 1
            texts = [m.content for m in messages if isinstance(m, AssistantMessage)]
            assert texts[-2:] == ["Deployed.", "Woken."]


async def test_a_cancelled_wake_up_never_fires(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_text("Noted."), assistant_text("Second one.")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(wake_up_spec(provider), "hello"))
            await said(session, "Noted.")
            first = await session.wake_up("the first", after=1)
            await session.cancel_wake_up(first.id)
            await session.wake_up("the second", after=2)  # due after the first would be
            messages = await said(session, "Second one.")
            assert [str(m.content).rsplit("] ", 1)[1] for m in woken(messages)] == ["the second"]
            assert len(provider.requests) == 2


async def test_a_wake_up_carried_across_continue_as_new_fires_once(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("wake_ups_set", {"text": "follow up", "after_seconds": 2})),
        assistant_text("Set."),
        assistant_text("Following up."),
    ]
    with ScriptedProvider(script) as provider:
        session_rules = {"end_after_reply": False, "continue_as_new_after_events": 20}
        spec = wake_up_spec(provider, session=session_rules)
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(spec, "follow up later"))
            messages = await said(session, "Following up.")
            status = await session.status()
            assert status.runs >= 2, "the session continued as new before it woke"
            assert len(woken(messages)) == 1
            assert len(provider.requests) == 3
            assert status.wake_ups == []


async def test_a_wake_up_survives_a_worker_restart_and_fires_once(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_text("Noted."), assistant_text("Back.")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(wake_up_spec(provider), "hello"))
            await said(session, "Noted.")
            await session.wake_up("come back", after=3)
        assert len(provider.requests) == 1, "the first worker is gone before it is due"
        async with running_worker(temporal_env, task_queue, registry) as client:
            messages = await said(session, "Back.")
            assert len(woken(messages)) == 1
            assert len(provider.requests) == 2


async def _true(value: bool) -> bool:
    return value


async def test_the_command_line_sets_lists_and_cancels_them_and_status_shows_them(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    address = address_of(temporal_env)
    with ScriptedProvider([assistant_text("Noted.")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(wake_up_spec(provider), "hello"))
            await said(session, "Noted.")
            common = ("--address", address)
            made = await acli(
                "wake-ups", "set", session.id, "--text", "weekly report", "--cron",
                "0 9 * * mon", "--timezone", "Europe/Paris", *common,
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            assert made.stdout.startswith("set w1: due ") and "(Europe/Paris)" in made.stdout
            often = await acli(
                "wake-ups", "set", session.id, "--text", "spam", "--every", "5s", *common
            )
            assert often.returncode != 0 and "the shortest interval is 60 s" in often.stderr
            listed = await acli("wake-ups", "list", session.id, *common)
            assert listed.stdout.splitlines() == [made.stdout.strip().removeprefix("set ")]
            status = await acli("status", session.id, *common)
            assert "wake-up:        w1: due " in status.stdout
            cancelled = await acli("wake-ups", "cancel", session.id, "w1", *common)
            assert cancelled.returncode == 0 and "wake-up w1 cancelled" in cancelled.stdout
            unknown = await acli("wake-ups", "cancel", session.id, "w1", *common)
            assert unknown.returncode != 0 and "no wake-up 'w1' is set" in unknown.stderr
            assert await session.wake_ups() == []
