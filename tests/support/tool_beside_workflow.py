"""A user's module that defines a tool and, beside it, a workflow that runs an agent
using it (the workflow sandbox imports this module afresh for each run)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._spec.document import AgentSpec
    from durable_agent._tools.functions import tool
    from durable_agent.temporal import run_agent

looked_up: list[str] = []


@tool
def stock_level(sku: str) -> str:
    """How many of an item are in stock."""
    looked_up.append(sku)
    return f"{sku}: 12 in stock"


@workflow.defn
class StockWorkflow:
    """Asks an agent about an item's stock."""

    @workflow.run
    async def run(self, sku: str, spec: AgentSpec) -> str:
        result = await run_agent(spec, f"How many {sku} are left?")  # inline, in this workflow
        answer: str = result.output
        return answer
