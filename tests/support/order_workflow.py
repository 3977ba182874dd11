"""A user's own workflow that runs an agent session as a child, typed
(tests/temporal/test_in_workflow.py)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._spec.document import AgentSpec
    from durable_agent.temporal import run_child_agent


@workflow.defn
class OrderWorkflow:
    """Asks an agent whether to refund an order, and reports what it said."""

    @workflow.run
    async def run(self, order_id: str, spec: AgentSpec) -> str:
        result = await run_child_agent(spec, f"Refund order {order_id}?", name="refund-check")
        return f"order {order_id}: {result.output}"
