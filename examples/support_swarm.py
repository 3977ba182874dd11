"""A support swarm with an approval: triage looks the customer up and hands the
conversation to billing; billing's refund waits for a person (approved here by this
program, as a person would in the CLI or the console).

    OPENAI_API_KEY=... python -m examples.support_swarm
"""

from __future__ import annotations

import asyncio

from durable_agent import Agent, AgentClient, ModelSpec, Registry, tool


@tool
def lookup_account(customer: str) -> str:
    """The customer's account and recent invoices."""
    return f"{customer}: plan pro, invoice 7 charged twice"


@tool
def refund_invoice(invoice: int) -> str:
    """Refund an invoice."""
    return f"refunded invoice {invoice}"


registry = Registry([lookup_account, refund_invoice])
"""What the worker runs for the swarm: its agents name these tools."""

SWARM = {
    "default_agent": "triage",
    "agents": [
        {
            "name": "triage",
            "description": "Finds out what the customer needs",
            "instructions": "Look the customer up, then hand billing questions to billing.",
            "tools": ["lookup_account"],
            "handoffs": ["billing"],
        },
        {
            "name": "billing",
            "description": "Invoices and refunds",
            "instructions": "Refund invoices charged twice; a person approves each refund.",
            "tools": [{"name": "refund_invoice", "approval": "always"}],
        },
    ],
}


def support_swarm(model: ModelSpec) -> Agent[str]:
    """The swarm as one agent of the session: its agents, their tools and handoffs."""
    return Agent(name="support", model=model, settings={"swarm": SWARM})


async def help_customer(agents: AgentClient, agent: Agent[str], question: str) -> str:
    """Run the conversation to its answer, approving the refund billing asks for."""
    session = await agents.start(agent.spec(one_reply=True), question)
    outcome = await agents.session(session).wait(timeout=120)
    answered: list[str] = []
    while outcome.kind == "approval":
        for pending in outcome.pending:
            print(f"approving {pending.tool_name} {pending.arguments}")
            await agents.session(session).approve(pending.approval_id, by="example")
            answered.append(pending.approval_id)
        outcome = await agents.session(session).wait(answered=answered, timeout=120)
    return await agents.session(session).output(agent)


async def main() -> None:
    from examples._running import model_or_exit, running

    agent = support_swarm(model_or_exit())
    async with running("support", registry=registry) as client:
        agents = AgentClient(client, task_queue="support")
        print(await help_customer(agents, agent, "Hi, I'm ada: I was charged twice this month"))


if __name__ == "__main__":
    asyncio.run(main())
