"""The examples, run against a scripted model through the testing kit users get: the
same agents, tools, workflows and steps their ``main`` runs, the model's replies given."""

from __future__ import annotations

import json

from durable_agent import ModelSpec
from durable_agent.capabilities import ProviderEndpoint
from durable_agent.testing import AgentTestEnvironment, assistant_calls, assistant_text
from examples import order_refund, order_workflow, support_swarm, time_report

ANY_MODEL = ModelSpec(name="gpt-4o-mini", endpoint=ProviderEndpoint())  # pointed at the script


async def test_the_order_workflow_asks_its_agent_and_a_person_approves_the_refund() -> None:
    decided = {"order_id": "o-17", "refunded": True, "reason": "arrived broken"}
    async with AgentTestEnvironment(
        task_queue="orders", workflows=[order_workflow.OrderWorkflow]
    ) as env:
        env.model.add(
            assistant_calls(("refund", {"order_id": "o-17", "amount_eur": 42})),
            assistant_text(json.dumps(decided)),
        )
        agent = env.scripted(order_refund.support_agent(ANY_MODEL))
        decision = await order_workflow.handle_complaint(
            env.agents, "o-17", agent.spec(one_reply=True)
        )
        sent = env.model.requests[1].body["messages"]
    assert decision == order_refund.RefundDecision(**decided)
    assert sent[-1] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": "refunded 42.00 EUR on o-17",
    }


async def test_the_research_agent_reads_the_mcp_clock_and_reports_typed() -> None:
    report = {
        "cities": [{"city": "Oslo", "timezone": "Europe/Oslo", "local_time": "13:05"}],
        "summary": "It is 13:05 in Oslo.",
    }
    researcher = time_report.researcher(ANY_MODEL)
    async with AgentTestEnvironment(task_queue="research", agents=[researcher]) as env:
        env.model.add(
            assistant_calls(("clock_get_current_time", {"timezone": "Europe/Oslo"})),
            assistant_text(json.dumps(report)),
        )
        run = await env.run(researcher, "What time is it in Oslo?")
        sent = env.model.requests[1].body["messages"][-1]
    assert run.output == time_report.TimeReport.model_validate(report)
    clock = json.loads(sent["content"])  # what the real MCP time server answered
    assert sent["role"] == "tool" and clock["timezone"] == "Europe/Oslo" and "datetime" in clock


async def test_the_swarm_hands_over_to_billing_whose_refund_a_person_approves() -> None:
    async with AgentTestEnvironment(task_queue="support", registry=support_swarm.registry) as env:
        env.model.add(
            assistant_calls(("lookup_account", {"customer": "ada"})),
            assistant_calls(("transfer_to_billing", {"reason": "charged twice"})),
            assistant_calls(("refund_invoice", {"invoice": 7})),
            assistant_text("Invoice 7 is refunded."),
        )
        agent = env.scripted(support_swarm.support_swarm(ANY_MODEL))
        answer = await support_swarm.help_customer(env.agents, agent, "I was charged twice")
        requests = [r.body["messages"] for r in env.model.requests]
    assert answer == "Invoice 7 is refunded."
    prompts = [messages[0]["content"] for messages in requests]
    assert prompts[:2] == [support_swarm.SWARM["agents"][0]["instructions"]] * 2  # triage
    assert prompts[2:] == [support_swarm.SWARM["agents"][1]["instructions"]] * 2  # billing
    assert requests[3][-1]["content"] == "refunded invoice 7", "the approved refund ran"
