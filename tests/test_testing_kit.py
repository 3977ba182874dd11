"""The testing kit users get: an Agent run end to end in a test, against a scripted
model, with its approvals decided by the test."""

from __future__ import annotations

from pydantic import BaseModel

from durable_agent import Agent, ModelSpec, ProviderEndpoint, ToolRegistry, tool
from durable_agent.testing import AgentTestEnvironment, assistant_calls, assistant_text

registry = ToolRegistry()
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
