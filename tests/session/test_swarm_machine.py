"""A swarm in the pure Session (no server, milliseconds): handoffs by generated tools,
the navigation stack, what each agent's request holds, a person's move, bad handoffs,
continue-as-new with another agent active, and the spec's errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from durable_agent._cli.render import format_history
from durable_agent._contracts.approvals import ApprovalSignal, PendingApproval
from durable_agent._contracts.boundary import MoveToAgentSignal
from durable_agent._session.protocol import MoveRequested
from durable_agent._session.toolbox import as_seen_by
from durable_agent._spec.document import AgentInput, AgentSpec, ModelSpec
from durable_agent._wire.codecs import build_request
from durable_agent._wire.messages import (
    AssistantMessage,
    Message,
    RecordedDecision,
    ToolMessage,
    UserMessage,
)
from durable_agent.testing import assistant_calls, assistant_text
from durable_agent.testing._in_process import InProcessRun
from tests.support.swarm_fixtures import (
    PROMPTS,
    agent_of,
    swarm_registry,
    swarm_section,
    triage_script,
)

TRIAGE_ROUTE = ["triage", "triage", "billing", "billing", "triage"]
"""Who answers each model call of the triage script."""


def swarm_spec(**extra: Any) -> AgentSpec:
    swarm = extra.pop("swarm", None) or swarm_section()
    return AgentSpec.model_validate(
        {
            "model": ModelSpec(name="m").model_dump(),
            "tools": ["lookup_account"],
            "swarm": swarm,
            "session": {"end_after_reply": True},
            **extra,
        }
    )


def driver_for(spec: AgentSpec, answer: Any, **kw: Any) -> InProcessRun:
    def model(body: dict[str, Any]) -> AssistantMessage:
        return answer(agent_of(body["messages"]), body["messages"])

    return InProcessRun(spec, swarm_registry(), model, **kw)


def tool_names(body: dict[str, Any]) -> list[str]:
    return sorted(t["function"]["name"] for t in body.get("tools", []))


async def test_a_triage_session_hands_over_and_back() -> None:
    driver = driver_for(swarm_spec(), triage_script())
    result = await driver.run(AgentInput(spec=driver.spec, message="I want a refund"))
    assert result.status == "done", result
    messages = driver.session.messages
    agents = [(m.role, m.agent_name) for m in messages]
    assert agents == [
        ("system", "triage"),
        ("user", "triage"),
        ("assistant", "triage"),  # lookup_account
        ("tool", "triage"),
        ("assistant", "triage"),  # transfer_to_billing
        ("tool", "triage"),
        ("assistant", "billing"),  # refund (approved by the driver)
        ("tool", "billing"),
        ("assistant", "billing"),  # transfer_back
        ("tool", "billing"),
        ("assistant", "triage"),
    ]
    assert [agent_of(b["messages"]) for b in driver.requests] == TRIAGE_ROUTE
    # each agent's own tools: the shared one, its own, its handoffs
    assert tool_names(driver.requests[0]) == [
        "lookup_account",
        "transfer_to_billing",
        "transfer_to_tech",
    ]
    assert tool_names(driver.requests[2]) == [
        "lookup_account",
        "refund",
        "transfer_back",
        "transfer_to_tech",
        "transfer_to_triage",
    ]
    refund = messages[7]
    assert isinstance(refund, ToolMessage) and refund.content == "refunded invoice 7"
    assert refund.approval is not None and refund.approval.decision == "approved"
    status = driver.session.view.status()
    assert status.agent == "triage" and status.agent_stack == []


async def test_what_billing_sees_when_it_takes_over() -> None:
    driver = driver_for(swarm_spec(), triage_script())
    await driver.run(AgentInput(spec=driver.spec, message="I want a refund"))
    seen = driver.requests[2]["messages"]
    assert seen[0] == {"role": "system", "content": PROMPTS["billing"]}
    assert PROMPTS["triage"] not in str(seen)  # only its own prompt
    assert seen[1] == {"role": "user", "content": "I want a refund"}
    # triage's tool-call turns are text, named; their results one user message after each
    assert seen[2]["role"] == "assistant" and seen[2]["name"] == "triage"
    assert seen[2]["content"] == '[triage called lookup_account {"customer": "ada"}]'
    assert "tool_calls" not in seen[2]
    assert seen[3] == {
        "role": "user",
        "content": "[lookup_account returned: ada: plan pro, invoice 7 charged twice]",
    }
    assert seen[4]["content"].startswith("[triage called transfer_to_billing")
    assert seen[5]["content"].startswith("[transfer_to_billing returned: Transferred to billing")
    assert not any(m["role"] == "tool" for m in seen)
    # triage, back again, sees its own turns as they were and billing's as text
    back = driver.requests[4]["messages"]
    assert back[0]["content"] == PROMPTS["triage"]
    assert back[2]["tool_calls"][0]["function"]["name"] == "lookup_account"
    assert back[3]["role"] == "tool"
    assert back[6] == {
        "role": "assistant",
        "content": '[billing called refund {"invoice": 7}]',
        "name": "billing",
    }


def test_pairing_holds_on_every_wire_after_a_handoff() -> None:
    """Another agent's calls become text on each API: no orphan results, no calls of
    tools the request lacks, and the request ends on the user's side."""
    triage_turns: list[Message] = [
        UserMessage(content="refund please", agent_name="triage"),
        assistant_calls(("transfer_to_billing", {}), reasoning="route", agent_name="triage"),
        ToolMessage(tool_call_id="call_0", content="Transferred to billing.", agent_name="triage"),
    ]
    seen = as_seen_by(triage_turns, "billing", "You are billing.")
    for api in ("chat", "responses", "anthropic"):
        body = build_request(api, seen, model="m")  # type: ignore[arg-type]
        text = str(body)
        assert "transfer_to_billing" in text and "route" not in text, api
        assert "tool_call" not in text and "tool_use" not in text, api
        assert "function_call" not in text, api
    anthropic = build_request("anthropic", seen, model="m")
    assert anthropic["system"] == "You are billing."
    assert anthropic["messages"][-1]["role"] == "user"


async def test_a_handoff_in_a_parallel_batch_waits_for_the_batch() -> None:
    """The batch's other calls run and are appended in request order; the first handoff
    wins, a second one in the batch is told it was not done; the next call is billing's."""

    def answer(agent: str, messages: list[dict[str, Any]]) -> AssistantMessage:
        if agent == "triage" and messages[-1]["role"] == "user":
            return assistant_calls(
                ("transfer_to_billing", {}),
                ("lookup_account", {"customer": "ada"}),
                ("transfer_to_tech", {}),
                ids="call_0",  # a provider that reuses one id
            )
        assert agent == "billing", agent
        return assistant_text("billing here")

    driver = driver_for(swarm_spec(), answer)
    result = await driver.run(AgentInput(spec=driver.spec, message="help"))
    assert result.final is not None and result.final.content == "billing here"
    results = [m for m in driver.session.messages if isinstance(m, ToolMessage)]
    assert [(r.tool_name, bool(r.is_error)) for r in results] == [
        ("transfer_to_billing", False),
        ("lookup_account", False),
        ("transfer_to_tech", True),
    ]
    assert "already hands the conversation to billing" in results[2].content
    assert [e[2] for e in driver.executed] == ["lookup_account"]
    assert driver.session.view.status().agent_stack == ["triage"]


async def test_a_bad_handoff_is_an_error_the_model_recovers_from() -> None:
    def answer(agent: str, messages: list[dict[str, Any]]) -> AssistantMessage:
        last = messages[-1]
        if agent == "triage" and last["role"] == "user" and last["content"] == "help":
            return assistant_calls(("transfer_to_ghost", {}), ("transfer_to_triage", {}))
        if agent == "triage":
            return assistant_calls(("transfer_to_tech", {}))
        return assistant_text("tech here")

    driver = driver_for(swarm_spec(), answer)
    result = await driver.run(AgentInput(spec=driver.spec, message="help"))
    assert result.final is not None and result.final.content == "tech here"
    ghost, itself = [m for m in driver.session.messages if isinstance(m, ToolMessage)][:2]
    assert ghost.is_error and "there is no agent 'ghost'" in ghost.content
    assert "transfer_to_billing, transfer_to_tech" in ghost.content
    assert itself.is_error and "you are the triage agent already" in itself.content


async def test_a_denied_handoff_keeps_the_agent() -> None:
    swarm = swarm_section(handoff_approval="always")

    def answer(agent: str, messages: list[dict[str, Any]]) -> AssistantMessage:
        if messages[-1]["role"] == "user":
            return assistant_calls(("transfer_to_billing", {"reason": "refund"}))
        return assistant_text(f"{agent}: I will help myself then")

    driver = driver_for(swarm_spec(swarm=swarm), answer, approver=lambda pending: "denied")
    result = await driver.run(AgentInput(spec=driver.spec, message="refund"))
    assert result.final is not None and result.final.content == "triage: I will help myself then"
    [denied] = [m for m in driver.session.messages if isinstance(m, ToolMessage)]
    assert denied.is_error and denied.approval is not None
    assert driver.session.view.model.agent_name == "triage"


async def test_navigation_stack_back_and_to_the_default() -> None:
    """triage > billing > tech; back from tech reaches billing; billing to triage (the
    default) empties the stack."""
    route = iter(
        [
            ("triage", "transfer_to_billing"),
            ("billing", "transfer_to_tech"),
            ("tech", "transfer_back"),
            ("billing", "transfer_to_triage"),
        ]
    )
    stacks: list[list[str]] = []

    def watch(driver: InProcessRun) -> None:
        status = driver.session.view.status()
        if not stacks or stacks[-1] != [*status.agent_stack, status.agent or ""]:
            stacks.append([*status.agent_stack, status.agent or ""])

    def answer(agent: str, messages: list[dict[str, Any]]) -> AssistantMessage:
        step = next(route, None)
        if step is None:
            return assistant_text(f"{agent} answers")
        assert step[0] == agent
        return assistant_calls((step[1], {}))

    driver = driver_for(swarm_spec(), answer, between_commands=watch)
    result = await driver.run(AgentInput(spec=driver.spec, message="hi"))
    assert result.final is not None and result.final.content == "triage answers"
    assert stacks == [
        ["triage"],
        ["triage", "billing"],
        ["triage", "billing", "tech"],
        ["triage", "billing"],
        ["triage"],
    ]


async def test_a_person_moves_the_session_between_turns_never_inside_a_batch() -> None:
    moves: list[str | None] = []

    def move(driver: InProcessRun) -> None:
        session = driver.session
        batch_open = session.view.loop.phase in ("awaiting_approval", "running_tools")
        if batch_open and not moves:
            for agent in ("tech", "nobody"):
                move = MoveToAgentSignal(agent=agent, by="ops" if agent == "tech" else None)
                moves.append(session.handle(MoveRequested(move), driver.clock))

    def answer(agent: str, messages: list[dict[str, Any]]) -> AssistantMessage:
        if agent == "triage":
            return assistant_calls(("lookup_account", {"customer": "ada"}))
        return assistant_text(f"{agent} takes it from here")

    driver = driver_for(swarm_spec(), answer, between_commands=move)
    result = await driver.run(AgentInput(spec=driver.spec, message="hi"))
    assert result.final is not None and result.final.content == "tech takes it from here"
    assert moves[0] is None and moves[1] is not None and "no agent 'nobody'" in moves[1]
    lookup = next(m for m in driver.session.messages if isinstance(m, ToolMessage))
    assert lookup.agent_name == "triage"  # the batch finished as triage's
    status = driver.session.view.status()
    assert (status.agent, status.agent_stack) == ("tech", ["triage"])
    assert status.agents == ["triage", "billing", "tech"]


async def test_continue_as_new_carries_the_active_agent_and_the_stack() -> None:
    driver = driver_for(swarm_spec(), triage_script(), continue_as_new_every=2)
    result = await driver.run(AgentInput(spec=driver.spec, message="I want a refund"))
    assert result.status == "done" and driver.runs > 3
    straight = driver_for(swarm_spec(), triage_script())
    await straight.run(AgentInput(spec=straight.spec, message="I want a refund"))
    assert list(driver.session.messages) == list(straight.session.messages)
    assert [agent_of(b["messages"]) for b in driver.requests] == TRIAGE_ROUTE


async def test_one_agent_sessions_record_no_agent() -> None:
    spec = AgentSpec(model=ModelSpec(name="m"), instructions="hi", tools=["lookup_account"])

    def model(body: dict[str, Any]) -> AssistantMessage:
        assert all("name" not in m for m in body["messages"])
        if body["messages"][-1]["role"] == "user":
            return assistant_calls(("lookup_account", {"customer": "ada"}))
        return assistant_text("done")

    driver = InProcessRun(spec, swarm_registry(), model)
    result = await driver.run(AgentInput(spec=spec, message="go"))
    assert result.status == "done"
    assert all(m.agent_name is None for m in driver.session.messages)
    assert driver.session.view.status().agent is None


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda s: s["agents"].append(dict(s["agents"][1])), "swarm.agents", "two agents"),
        (lambda s: s.update(default_agent="boss"), "swarm.default_agent", "'boss'"),
        (
            lambda s: s["agents"][0].update(handoffs=["legal"]),
            "swarm.agents[triage].handoffs",
            "'legal'",
        ),
        (
            lambda s: s["agents"][2].update(tools=["transfer_to_x"]),
            "swarm.agents[tech].tools",
            "transfer_",
        ),
        (lambda s: s["agents"][0].update(name="has space"), "name", "pattern"),
    ],
)
def test_bad_swarms_are_rejected_naming_the_field(change: Any, field: str, words: str) -> None:
    swarm = swarm_section()
    change(swarm)
    with pytest.raises(ValidationError) as caught:
        swarm_spec(swarm=swarm)
    assert field in str(caught.value) and words in str(caught.value)


def test_a_swarm_takes_its_agents_instructions_not_the_sessions() -> None:
    with pytest.raises(ValidationError, match="instructions: a swarm's agents each have"):
        swarm_spec(instructions="one prompt for all")


def _readme_block(marker: str, kind: str) -> str:
    """A block of the manual's page on many agents (it moved there from the README)."""
    readme = (
        Path(__file__).parent.parent.parent / "docs" / "how-to" / "many-agents.md"
    ).read_text()
    return readme[readme.index(marker) :].split(f"```{kind}\n", 1)[1].split("```", 1)[0]


async def test_the_readme_swarm_example_gives_the_readme_transcript() -> None:
    """The README's spec (billing on the Messages API) run on the pure Session with the
    triage script; `durable-agent history`'s rendering of it is the README's."""
    spec = AgentSpec.model_validate(json.loads(_readme_block("<!-- swarm-spec -->", "json")))
    script = triage_script()

    def model(body: dict[str, Any]) -> AssistantMessage:
        if "system" in body:  # billing, on the Messages API
            assert body["system"] == PROMPTS["billing"]
            content = body["messages"][-1]["content"]
            if any(block.get("type") == "tool_result" for block in content):
                return assistant_calls(("transfer_back", {"reason": "refund done"}))
            return assistant_calls(("refund", {"invoice": 7}))
        return script(agent_of(body["messages"]), body["messages"])

    def ops(pending: PendingApproval) -> tuple[RecordedDecision, ApprovalSignal]:
        return "approved", ApprovalSignal(approval_id=pending.approval_id, by="ops")

    driver = InProcessRun(spec, swarm_registry(), model, approver=ops)
    message = "I was charged twice, I want a refund"
    result = await driver.run(AgentInput(spec=spec, message=message))
    assert result.status == "done", result
    shown = "\n".join(format_history(driver.session.messages)) + "\n"
    assert shown == _readme_block("<!-- swarm-transcript -->", "text")
    assert [r["model"] for r in driver.requests] == [
        "gpt-4o",
        "gpt-4o",
        "claude-sonnet-4-5",
        "claude-sonnet-4-5",
        "gpt-4o",
    ]
