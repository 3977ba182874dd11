"""The support agent of the order example (examples/order_workflow.py): its refund tool,
which a person approves, and the typed decision it answers with. The worker runs the
agent's tools because the agent is given to it (``DurableAgentPlugin(agents=[...])``)."""

from __future__ import annotations

from pydantic import BaseModel

from durable_agent import Agent, ModelSpec, tool


@tool(approval="always")
def refund(order_id: str, amount_eur: float) -> str:
    """Refund an order (a person approves each refund)."""
    return f"refunded {amount_eur:.2f} EUR on {order_id}"


class RefundDecision(BaseModel):
    order_id: str
    refunded: bool
    reason: str


def support_agent(model: ModelSpec) -> Agent[RefundDecision]:
    return Agent(
        name="support",
        model=model,
        instructions="Refund damaged orders in full with the refund tool, then say what you did.",
        tools=[refund],
        output_type=RefundDecision,
    )
