"""The loop's own events in the live log, each from a real session: a guardrail that
blocks a message, a handoff between agents, a compaction, a trim, and an answer a
provider cut for its content filter."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, Registry, guardrail
from durable_agent._contracts.events import LiveEvent
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.context import ContextRules
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import running_worker, spec_for
from tests.support.swarm_fixtures import swarm_registry, swarm_section


@guardrail
def no_card_numbers(text: str) -> str | None:
    return "a card number" if "4111" in text else None


async def events_of(
    env: WorkflowEnvironment,
    task_queue: str,
    registry: Registry,
    spec: Any,
    *messages: str,
) -> list[LiveEvent]:
    """Run a session of ``spec`` through ``messages`` (one after another), end it, and
    read its whole live log."""
    async with running_worker(env, task_queue, registry):
        agents = AgentClient(env.client, task_queue=task_queue)
        sid = await agents.start(spec, messages[0])
        session = agents.session(sid)
        await session.wait(timeout=60)
        for message in messages[1:]:
            after = len(await session.messages())
            await session.send(message)
            await session.wait(after=after, timeout=60)
        await session.end()
        await asyncio.wait_for(session.result_if_closed(), 60)
        return [e async for e in session.follow(after=-1)]


def with_context(spec: AgentSpec, when_over: str) -> AgentSpec:
    """``spec`` over a 700-character budget (a character a token), ``when_over`` it."""
    rules = ContextRules.model_validate(
        {"budget_tokens": 700, "chars_per_token": 1, "when_over": when_over}
    )
    return spec.model_copy(update={"model": spec.model.model_copy(update={"context": rules})})


def of_type(events: list[LiveEvent], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


async def test_a_blocked_message_is_a_guardrail_blocked_event(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("never sent")]) as provider:
        spec = spec_for(provider, session={}, guardrails={"input": ["no_card_numbers"]})
        events = await events_of(
            temporal_env, task_queue, Registry([no_card_numbers]), spec, "pay with 4111 1111"
        )
        asked = len(provider.requests)
    [blocked] = of_type(events, "guardrail_blocked")
    assert blocked.kind == "input" and blocked.reason == "a card number", blocked
    assert asked == 0, "the model never saw the message"


async def test_a_handoff_is_an_agent_changed_event(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("transfer_to_billing", {"reason": "invoice 7"})),
        assistant_text("Billing here: invoice 7 is paid."),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, session={}, swarm=swarm_section())
        events = await events_of(
            temporal_env, task_queue, swarm_registry(), spec, "I was charged twice"
        )
    changed = of_type(events, "agent_changed")
    assert changed and (changed[0].previous, changed[0].agent) == ("triage", "billing"), changed


async def test_compaction_and_trimming_are_announced(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    long = "x" * 400
    compacting = [assistant_text(f"answer {i} {long}") for i in range(2)]
    compacting.insert(1, assistant_text("SUMMARY: two questions were asked"))
    with ScriptedProvider(compacting) as provider:
        spec = with_context(spec_for(provider, session={}), "compact")
        compacted = await events_of(
            temporal_env, task_queue, Registry(), spec, f"first {long}", f"second {long}"
        )
    trimming = [assistant_text(f"answer {i} {long}") for i in range(2)]
    with ScriptedProvider(trimming) as provider:
        spec = with_context(spec_for(provider, session={}), "trim")
        trimmed = await events_of(
            temporal_env, task_queue, Registry(), spec, f"first {long}", f"second {long}"
        )
    assert of_type(compacted, "compacted"), [e.type for e in compacted]
    assert of_type(trimmed, "trimmed"), [e.type for e in trimmed]


async def test_an_answer_cut_by_the_content_filter_is_not_taken_as_complete(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    cut = assistant_text("Here is how to", finish_reason="content_filter")
    with ScriptedProvider([cut, cut, cut, cut]) as provider:
        spec = spec_for(provider)
        async with running_worker(temporal_env, task_queue, Registry()):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            sid = await agents.start(spec, "tell me")
            result = await asyncio.wait_for(agents.session(sid).result(), 60)
            events = [e async for e in agents.session(sid).follow(after=-1)]
    assert result.status == "failed" and result.stop_reason == "truncated", result
    assert "content_filter" in (result.error or ""), result.error
    ended = of_type(events, "turn_ended")
    assert ended and ended[-1].reason == "truncated", ended
    assert "content_filter" in ended[-1].error, ended[-1]
