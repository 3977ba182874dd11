"""A user's module: an agent with a typed output and two tools (one a person approves),
and workflows that run it inline and as a child (tests/temporal/test_inline_runs.py).

The agent names its model endpoint (``scripted``); the worker registers where that is.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent import Agent, ModelSpec, tool
    from durable_agent._contracts.approvals import (
        DecisionRequest,
        DecisionResult,
        PendingApproval,
    )
    from durable_agent._spec.tools import ToolContext
    from durable_agent.temporal import AgentRun, run_agent, run_child_agent


class Verdict(BaseModel):
    order_id: str
    fraud: bool
    score: float


@tool
async def order_history(order_id: str, ctx: ToolContext) -> str:
    """The order's payment history."""
    keys = os.environ.get("INLINE_KEYS")
    if keys:  # which call this is, as the tool sees it
        _append(Path(keys), ctx.idempotency_key)
    ledger = os.environ.get("INLINE_LEDGER")
    if ledger:  # the killed-worker test: the first attempt hangs until the kill
        attempts = _note_attempt(Path(ledger), order_id)
        if attempts == 1:
            await asyncio.sleep(3600)
    return f"{order_id}: 3 chargebacks in 30 days"


def _append(path: Path, line: str) -> None:
    with path.open("a") as out:
        out.write(line + "\n")


def _note_attempt(ledger: Path, order_id: str) -> int:
    attempts = ledger.read_text().count("\n") + 1 if ledger.exists() else 1
    with ledger.open("a") as out:
        out.write(f"order_history {order_id} attempt {attempts}\n")
    return attempts


@tool(approval="always")
def hold_order(order_id: str) -> str:
    """Hold an order for review (a person approves)."""
    held = os.environ.get("INLINE_HELD")
    if held:
        with open(held, "a") as out:
            out.write(order_id + "\n")
    return f"{order_id} held"


fraud_check = Agent(
    name="fraud_check",
    model=ModelSpec(name="scripted-model", endpoint="scripted", initial_retry_seconds=0.1),
    instructions="Decide whether an order is fraud.",
    tools=[order_history, hold_order],
    output_type=Verdict,
)


@workflow.defn
class FraudCheckWorkflow:
    """Runs the agent inline; people decide its held calls through this workflow's
    ``decide`` update, and read them with its ``pending`` query."""

    @workflow.init
    def __init__(self, order_id: str) -> None:
        self.check = AgentRun(fraud_check)

    @workflow.update
    async def decide(self, decision: DecisionRequest) -> DecisionResult:
        return await self.check.decide(decision)

    @workflow.query
    def pending(self) -> list[PendingApproval]:
        return self.check.pending()

    @workflow.run
    async def run(self, order_id: str) -> Verdict:
        result = await self.check.run(f"Is order {order_id} fraud?")
        verdict: Verdict = result.output  # typed by the agent's output_type
        return verdict


@workflow.defn
class AutoApprovedCheck:
    """Runs the agent inline with an approver of its own: it approves holds of orders
    whose id starts with ``o-``, and denies any other."""

    @workflow.run
    async def run(self, order_id: str) -> list[str]:
        async def approver(pending: PendingApproval) -> DecisionRequest:
            held = '"o-' in pending.arguments
            return DecisionRequest(
                approval_id=pending.approval_id,
                decision="approve" if held else "deny",
                by="order-rules",
            )

        result = await run_agent(fraud_check, f"Is order {order_id} fraud?", approver=approver)
        # the run's messages go on in a second run, as a workflow that continued as new would
        again = await run_agent(fraud_check, "And now?", history=result.messages)
        return [result.output.model_dump_json(), again.output.model_dump_json()]


@workflow.defn
class ChildFraudCheck:
    """Runs the agent as a child session, typed the same."""

    @workflow.run
    async def run(self, order_id: str) -> Verdict:
        result = await run_child_agent(fraud_check, f"Is order {order_id} fraud?", name="fraud")
        verdict: Verdict = result.output
        return verdict


@workflow.defn
class TwoChecks:
    """Two inline runs of the same agent, one after the other, in one workflow."""

    @workflow.run
    async def run(self, order_id: str) -> list[str]:
        first = await run_agent(fraud_check, f"Is order {order_id} fraud?")
        second = await run_agent(fraud_check, f"Is order {order_id} fraud, again?")
        return [first.output.model_dump_json(), second.output.model_dump_json()]


@tool(approval="always", approvers=["alice"])
def transfer(to: str, amount: int) -> str:
    """Send money (only alice's signed decision lets a transfer run)."""
    ledger = os.environ.get("INLINE_TRANSFERS")
    if ledger:
        _append(Path(ledger), f"{to} {amount}")
    return f"sent {amount} to {to}"


payer = Agent(
    name="payer",
    model=ModelSpec(name="scripted-model", endpoint="scripted", initial_retry_seconds=0.1),
    instructions="Pay what you are asked to.",
    tools=[transfer],
)


@workflow.defn
class TwoPayments:
    """Two inline runs of the same agent, one after the other; people decide the run
    that waits through ``decide``, and ``pending`` shows its calls."""

    @workflow.init
    def __init__(self, to: str) -> None:
        self.runs = [AgentRun(payer), AgentRun(payer)]
        self.current = 0

    @workflow.update
    async def decide(self, decision: DecisionRequest) -> DecisionResult:
        return await self.runs[self.current].decide(decision)

    @workflow.query
    def pending(self) -> list[PendingApproval]:
        return self.runs[self.current].pending()

    @workflow.run
    async def run(self, to: str) -> list[str]:
        answers = []
        for k, agent_run in enumerate(self.runs):
            self.current = k
            result = await agent_run.run(f"Pay {to} 100.")
            answers.append(str(result.output))
        return answers
