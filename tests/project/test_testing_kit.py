"""The testing kit users get: an Agent run end to end in a test, against a scripted
model, with its approvals decided by the test."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from pydantic import BaseModel

from durable_agent import Agent, ModelSpec, Registry, tool
from durable_agent._client.results import SessionNotFoundError, WaitOutcome
from durable_agent.capabilities import ProviderEndpoint
from durable_agent.testing import (
    AgentTestEnvironment,
    ScriptedProvider,
    assistant_calls,
    assistant_text,
)
from tests.support.agent_harness import wait_for

registry = Registry()
refunded: list[str] = []


@tool(registry=registry, approval="always")
def refund(order: str) -> str:
    """Refund an order (a person approves each one)."""
    refunded.append(order)
    return f"refunded {order}"


class Outcome(BaseModel):
    order: str
    refunded: bool


support = Agent(
    name="support",
    model=ModelSpec(name="gpt-4o-mini", endpoint=ProviderEndpoint()),  # never reached
    instructions="Refund what the customer asks for.",
    tools=[refund],
    output_type=Outcome,
)


async def test_an_agent_runs_with_its_approvals_decided_in_the_test() -> None:
    refunded.clear()
    seen: list[str] = []

    def decide(pending: object) -> str:
        seen.append(getattr(pending, "tool_name", ""))
        return "approve" if not refunded else "deny"

    async with AgentTestEnvironment(registry=registry) as env:
        env.model.add(
            assistant_calls(("refund", {"order": "o-1"})),
            assistant_calls(("refund", {"order": "o-1"})),  # asks twice: denied
            assistant_text('{"order": "o-1", "refunded": true}'),
        )
        run = await env.run(support, "Refund o-1, please", decide=decide)  # type: ignore[arg-type]
        messages = await env.messages(run.session_id)
    assert run.output == Outcome(order="o-1", refunded=True)
    assert seen == ["refund", "refund"] and refunded == ["o-1"], "the denied call did not run"
    results = [m.content for m in messages if m.role == "tool"]
    assert results[0] == "refunded o-1" and "denied" in results[1].lower(), results
    assert env.model.requests[0].body["model"] == "gpt-4o-mini"


triage = Agent(
    name="triage",
    model=ModelSpec(name="gpt-4o-mini", endpoint="openai"),  # a registered name
    instructions="Hand billing questions to support.",
    handoffs=[support],
)


async def test_a_registered_agent_runs_by_name_and_hands_off_on_the_scripted_model() -> None:
    """``agents.run("triage", ...)`` on the environment's client: the agent (a swarm
    of triage and support, by its handoffs) is found by name, its endpoint name and
    its handoff's inline endpoint both lead to the scripted model."""
    refunded.clear()
    async with AgentTestEnvironment(registry=registry, agents=[triage]) as env:
        env.model.add(
            assistant_calls(("transfer_to_support", {"reason": "a refund"})),
            assistant_calls(("refund", {"order": "o-2"})),
            assistant_text('{"order": "o-2", "refunded": true}'),
        )
        agents = env.agents
        session = "by-name-1"
        running = asyncio.create_task(agents.run("triage", "Refund o-2", session_id=session))

        async def asked() -> WaitOutcome | None:
            try:
                return await agents.session(session).wait()
            except SessionNotFoundError:  # not started yet
                return None

        outcome = await wait_for(asked, timeout=60)
        assert outcome.kind == "approval" and outcome.pending[0].tool_name == "refund"
        await agents.session(session).approve(outcome.pending[0].approval_id, by="test")
        run = await running
        with pytest.raises(LookupError, match=r"no agent 'billing' on this client \(agents: "):
            await agents.run("billing", "hi")
    assert refunded == ["o-2"] and run.output == '{"order": "o-2", "refunded": true}'
    # after the handoff, support answers with its own instructions
    assert env.model.requests[1].body["messages"][0]["content"] == support.instructions


researcher = Agent(
    name="researcher",
    model=ModelSpec(name="gpt-4o-mini", endpoint="openai"),
    instructions="Answer one question in a sentence.",
    description="Researches one question",
)
desk = Agent(
    name="desk",
    model=ModelSpec(name="gpt-4o-mini", endpoint="openai"),
    instructions="Ask the researcher, then answer.",
    sub_agents=[researcher],
)


async def test_a_registered_agent_calls_another_as_a_tool() -> None:
    """``sub_agents``: the researcher runs as a child session of the desk's call, on
    the worker that registered both; its answer is the call's result."""
    async with AgentTestEnvironment(agents=[desk]) as env:
        env.model.add(
            assistant_calls(("researcher", {"task": "what is 6 x 7?"})),  # the desk
            assistant_text("42"),  # the researcher, in its own session
            assistant_text("The researcher says 42."),  # the desk again
        )
        run = await env.agents.run("desk", "ask the researcher")
    assert run.output == "The researcher says 42."
    child_request = env.model.requests[1].body["messages"]
    assert child_request[0]["content"] == researcher.instructions
    assert child_request[-1]["content"] == "what is 6 x 7?"
    tool_result = env.model.requests[2].body["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["content"] == "42"


def test_the_scripted_model_can_answer_without_keeping_requests() -> None:
    """``keep_requests=False``: answers as scripted, over real HTTP, and holds no body."""
    bodies = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for keep in (True, False):
        with ScriptedProvider(
            [assistant_text("one"), assistant_text("two")], keep_requests=keep
        ) as provider:
            replies = [
                httpx.post(f"{provider.base_url}/chat/completions", json=bodies, timeout=10)
                for _ in range(2)
            ]
        contents = [r.json()["choices"][0]["message"]["content"] for r in replies]
        assert contents == ["one", "two"]
        assert len(provider.requests) == (2 if keep else 0)
