"""An agent called from inside an order workflow: the order workflow asks the support
agent (examples/order_refund.py) whether to refund; the agent's refund tool waits for a
person's approval (given here by this program, as a person would in the CLI or the
console), and the workflow gets the agent's typed decision.

    OPENAI_API_KEY=... python -m examples.order_workflow
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent import AgentClient, AgentSpec, RunResult
    from durable_agent.temporal import run_child_agent
    from examples.order_refund import RefundDecision, support_agent


@workflow.defn
class OrderWorkflow:
    """Handles a complaint about an order by asking the support agent."""

    @workflow.run
    async def run(self, order_id: str, complaint: str, spec: AgentSpec) -> RefundDecision:
        # a child session: people find it (and approve its refund) by its id
        result: RunResult[Any] = await run_child_agent(
            spec, f"Order {order_id}: {complaint}", name="support"
        )
        return RefundDecision.model_validate(result.output)


async def handle_complaint(agents: AgentClient, order: str, spec: AgentSpec) -> RefundDecision:
    """Start the order workflow, approve the refund its agent asks for, and return what
    the workflow decided."""
    handle = await agents.temporal.start_workflow(
        OrderWorkflow.run,
        args=[order, "it arrived broken (paid 42 EUR)", spec],
        id=f"order-{order}",
        task_queue=agents.task_queue,
    )
    session = agents.session(f"{handle.id}--support")
    await session.started(timeout=60)  # the workflow starts it
    outcome = await session.wait(timeout=60)
    if outcome.kind == "approval":
        for pending in outcome.pending:
            print(f"approving {pending.tool_name} {pending.arguments}")
            await session.approve(pending.approval_id, by="example")
    decision: RefundDecision = await handle.result()
    return decision


async def main() -> None:
    from examples._running import model_or_exit, running

    agent = support_agent(model_or_exit())
    async with running("orders", workflows=[OrderWorkflow], agents=[agent]) as client:
        agents = AgentClient(client, task_queue="orders")
        print(await handle_complaint(agents, "o-17", agent.spec(one_reply=True)))


if __name__ == "__main__":
    asyncio.run(main())
