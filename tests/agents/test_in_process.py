"""An agent's loop in the test's own process (``run_in_process``): no server, the
rules a worker applies (admission, the owner's gates, approvals by callback), answered
by a ``FunctionModel`` or a ``TestModel``."""

from __future__ import annotations

from pydantic import BaseModel

from durable_agent import Agent, AssistantMessage, DurableAgentError, PendingApproval, tool
from durable_agent.capabilities import Capabilities
from durable_agent.testing import (
    AgentTestEnvironment,
    FunctionModel,
    ModelRequest,
    TestModel,
    assistant_calls,
    assistant_text,
    run_in_process,
)

refunded: list[str] = []


@tool(approval="always")
def refund(order: str) -> str:
    """Refund an order (a person approves each one)."""
    refunded.append(order)
    return f"refunded {order}"


class Outcome(BaseModel):
    order: str
    refunded: bool


support = Agent(
    name="support",
    model="openai:gpt-4o-mini",
    instructions="Refund what the customer asks.",
    tools=[refund],
    output_type=Outcome,
)


def script(request: ModelRequest) -> AssistantMessage:
    """Refund once, then say how it went (by what the tool answered)."""
    done = [m for m in request.since_last_user() if m.role == "tool"]
    if not done:
        return assistant_calls(("refund", {"order": "o-1"}))
    ran = "refunded" in str(done[-1].content) and not done[-1].is_error
    return assistant_text(Outcome(order="o-1", refunded=ran).model_dump_json())


async def test_a_gated_call_asks_the_approver_and_the_answer_is_typed() -> None:
    refunded.clear()
    asked: list[PendingApproval] = []

    def approver(pending: PendingApproval) -> str:
        asked.append(pending)
        return "approved"

    run = await run_in_process(
        support, "Refund o-1", model=FunctionModel(script), approver=approver
    )
    assert run.output == Outcome(order="o-1", refunded=True)
    assert [p.tool_name for p in asked] == ["refund"] and refunded == ["o-1"]


async def test_a_denied_call_does_not_run() -> None:
    refunded.clear()
    run = await run_in_process(
        support, "Refund o-1", model=script, approver=lambda pending: "denied"
    )
    assert run.output == Outcome(order="o-1", refunded=False)
    assert refunded == [], "the denied call never ran"


async def test_what_the_worker_would_refuse_is_refused_before_the_model_is_asked() -> None:
    asked: list[ModelRequest] = []

    def never(request: ModelRequest) -> AssistantMessage:
        asked.append(request)
        return assistant_text("{}")

    elsewhere = Agent(name="elsewhere", model="billing:gpt-4o", tools=[refund])
    registered = Capabilities(models={})  # your worker's registries: no such endpoint
    try:
        await run_in_process(elsewhere, "hi", model=never, capabilities=registered)
    except DurableAgentError as error:
        refused = str(error)
    else:
        raise AssertionError("admitted")
    assert "model.endpoint" in refused and "billing" in refused
    assert asked == [], "no model call"


async def test_the_test_model_answers_in_process() -> None:
    refunded.clear()
    run = await run_in_process(
        support, "Refund o-1", model=TestModel(), approver=lambda pending: "approved"
    )
    assert isinstance(run.output, Outcome)
    assert len(refunded) == 1, "the test model calls each tool once"


async def test_a_call_nobody_decides_says_so_rather_than_waiting() -> None:
    refunded.clear()
    try:
        await run_in_process(support, "Refund o-1", model=script)
    except DurableAgentError as error:
        said = str(error)
    else:
        raise AssertionError("it went on")
    assert "refund" in said and "give an approver" in said and refunded == []


async def test_a_spec_cannot_loosen_the_owners_gate() -> None:
    """The agent's own rules allow every refund, but the tool's owner gates each call:
    as on a worker, a person is asked all the same."""
    refunded.clear()
    loose = Agent(
        name="loose",
        model="openai:gpt-4o-mini",
        tools=[refund],
        output_type=Outcome,
        settings={"approvals": {"rules": [{"tools": ["refund"], "action": "allow"}]}},
    )
    asked: list[str] = []

    def approver(pending: PendingApproval) -> str:
        asked.append(pending.tool_name)
        return "denied"

    run = await run_in_process(loose, "Refund o-1", model=script, approver=approver)
    assert asked == ["refund"] and refunded == []
    assert run.output == Outcome(order="o-1", refunded=False)


async def test_the_same_agent_end_to_end_with_a_function_model() -> None:
    """The model a test wrote, inside ``AgentTestEnvironment``: a real server and worker."""
    refunded.clear()
    async with AgentTestEnvironment(agents=[support], model=FunctionModel(script)) as env:
        run = await env.run(support, "Refund o-1", decide=lambda pending: "approve")
    assert run.output == Outcome(order="o-1", refunded=True)
    assert refunded == ["o-1"]
    assert env.model.requests[1].body["messages"][-1]["role"] == "tool"
