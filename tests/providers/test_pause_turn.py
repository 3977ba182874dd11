"""Anthropic pauses a long turn of server tools (``stop_reason: "pause_turn"``); the
worker sends the same request again with the turn so far appended as the assistant's,
within the one model call, and the session keeps the whole turn as one reply. Driven
by a real worker on the dev server against the scripted provider on the Messages wire,
streamed, as Anthropic streams it."""

from __future__ import annotations

from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, AgentSpec
from durable_agent._contracts.events import HostedToolUsed, TextDelta
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.capabilities import Capabilities
from durable_agent.testing import ScriptedProvider
from tests.support.agent_harness import running_worker
from tests.support.hosted_replies import anthropic_paused, anthropic_searched

SEARCH = "web_search_20250305"


def search_spec() -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "model": {
                "name": "claude",
                "endpoint": "claude",
                "max_attempts": 1,
                "options": {"hosted_tools": [{"name": SEARCH}]},
            },
            "session": {"end_after_reply": True},
        }
    )


def allowing(url: str) -> Capabilities:
    return Capabilities(
        models={"claude": ProviderEndpoint(base_url=url, api="anthropic", api_key_env=None)},
        endpoint_rules={"claude": {"hosted_tools": {SEARCH: {}}}},
    )


async def run_session(
    env: WorkflowEnvironment, task_queue: str, url: str
) -> tuple[list[Any], list[Any], Any]:
    """The session's messages, its live events and its status once it ended."""
    async with running_worker(env, task_queue, Registry(), capabilities=allowing(url)) as client:
        agents = AgentClient(client, task_queue=task_queue)
        session = agents.session(await agents.start(search_spec(), "Weather in Oslo this week?"))
        events = [e async for e in session.follow()]
        return await session.messages(), events, await session.status()


def items_of(message: AssistantMessage) -> list[dict[str, Any]]:
    assert message.provider_items is not None
    return message.provider_items.items


async def test_a_paused_turn_goes_on_and_is_kept_whole_as_one_reply(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Paused twice, then done: three requests, each the first one with the turn so far
    appended verbatim; one assistant message holding every block in order, its usage
    summed, each search counted once and shown once, and its text streamed whole."""
    first = anthropic_paused("Looking. ", "oslo weather", ident="srvtoolu_1")
    second = anthropic_paused("Still looking. ", "oslo forecast", ident="srvtoolu_2")
    last = anthropic_searched("Sunny all week.", "oslo week", ident="srvtoolu_3")
    with ScriptedProvider([first, second, last]) as provider:
        messages, events, status = await run_session(temporal_env, task_queue, provider.base_url)
    asked, again, third = provider.bodies()
    assert asked["stream"] is True and again["stream"] is True
    turns = asked["messages"]
    paused = {"role": "assistant", "content": items_of(first)}
    assert again == {**asked, "messages": [*turns, paused]}, "the paused blocks, verbatim"
    so_far = [*items_of(first), *items_of(second)]
    assert third == {**asked, "messages": [*turns, {"role": "assistant", "content": so_far}]}
    assert [m.role for m in messages] == ["user", "assistant"]
    reply = messages[1]
    assert isinstance(reply, AssistantMessage)
    assert reply.content == "Looking. Still looking. Sunny all week."
    assert items_of(reply) == [*so_far, *items_of(last)]
    assert reply.finish_reason == "stop"
    assert reply.usage is not None and reply.usage.hosted_calls == {"web_search": 3}
    assert reply.usage.prompt_tokens == 90 and reply.usage.completion_tokens == 18
    shown = [e.id for e in events if isinstance(e, HostedToolUsed)]
    assert shown == ["srvtoolu_1", "srvtoolu_2", "srvtoolu_3"]
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed == reply.content, "the continuations' text streamed on"
    assert status.spend["claude"].usage.hosted_calls == {"web_search": 3}


async def test_a_turn_paused_past_the_bound_ends_with_what_it_has_and_says_so(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A turn that pauses every time: the first request and five continuations, then
    the turn ends with what it has, its finish reason ``pause_turn`` in the status."""
    paused = [anthropic_paused(f"part {k}. ", "oslo", ident=f"srvtoolu_{k}") for k in range(8)]
    with ScriptedProvider(paused) as provider:
        messages, _, status = await run_session(temporal_env, task_queue, provider.base_url)
    assert len(provider.requests) == 6
    reply = messages[-1]
    assert isinstance(reply, AssistantMessage) and reply.finish_reason == "pause_turn"
    assert reply.content == "".join(f"part {k}. " for k in range(6))
    assert reply.usage is not None and reply.usage.hosted_calls == {"web_search": 6}
    assert status.finish_reason == "pause_turn"


def in_container(message: AssistantMessage, container: str) -> AssistantMessage:
    assert message.provider_items is not None
    items = message.provider_items.model_copy(update={"container": container})
    return message.model_copy(update={"provider_items": items})


async def test_a_paused_turn_goes_on_in_the_container_its_code_ran_in(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A paused reply that ran in a code-execution container (the response's
    ``container``, streamed with the message's last delta): its continuation names that
    container, so the code goes on with what it left there; the first request names
    none, and the whole turn keeps the container its last part ran in."""
    first = in_container(anthropic_paused("Running. ", "fit", ident="srvtoolu_1"), "cntr_7")
    last = in_container(anthropic_searched("Done.", "plot", ident="srvtoolu_2"), "cntr_7")
    with ScriptedProvider([first, last]) as provider:
        messages, _, _ = await run_session(temporal_env, task_queue, provider.base_url)
    asked, again = provider.bodies()
    assert "container" not in asked
    assert again["container"] == "cntr_7"
    assert again == {
        **asked,
        "messages": [*asked["messages"], {"role": "assistant", "content": items_of(first)}],
        "container": "cntr_7",
    }
    reply = messages[1]
    assert isinstance(reply, AssistantMessage) and reply.provider_items is not None
    assert reply.provider_items.container == "cntr_7"
