"""A three-agent triage swarm shared by the swarm tests: its spec, tools and a model
that answers as whichever agent the request's system prompt names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import assistant_calls, assistant_text

PROMPTS = {
    "triage": "You are triage: send billing questions to billing, faults to tech.",
    "billing": "You are billing: refunds need a person's approval.",
    "tech": "You are tech support.",
}


def swarm_section(**billing: Any) -> dict[str, Any]:
    return {
        "default_agent": "triage",
        "agents": [
            {
                "name": "triage",
                "description": "Routes the customer",
                "instructions": PROMPTS["triage"],
                "handoffs": ["billing", "tech"],
            },
            {
                "name": "billing",
                "description": "Invoices and refunds",
                "instructions": PROMPTS["billing"],
                "tools": [{"name": "refund", "approval": "always"}],
                **billing,
            },
            {
                "name": "tech",
                "description": "Faults and outages",
                "instructions": PROMPTS["tech"],
                "tools": ["diagnose"],
            },
        ],
    }


def swarm_registry() -> Registry:
    registry = Registry()

    @tool(registry=registry)
    def lookup_account(customer: str) -> str:
        """The customer's account."""
        return f"{customer}: plan pro, invoice 7 charged twice"

    @tool(registry=registry)
    def refund(invoice: int) -> str:
        """Refund an invoice."""
        return f"refunded invoice {invoice}"

    @tool(registry=registry)
    def diagnose(device: str) -> str:
        """Run diagnostics."""
        return f"{device}: firmware out of date"

    return registry


def agent_of(messages: list[dict[str, Any]]) -> str:
    """The agent a Chat Completions request is for, by its system prompt."""
    first = messages[0] if messages else {}
    for name, prompt in PROMPTS.items():
        if first.get("role") == "system" and first.get("content") == prompt:
            return name
    raise AssertionError(f"no agent's prompt first: {first}")


def triage_script() -> Callable[[str, list[dict[str, Any]]], AssistantMessage]:
    """Triage looks the account up and hands over to billing; billing refunds (a person
    approves) and hands back; triage closes."""

    def answer(agent: str, messages: list[dict[str, Any]]) -> AssistantMessage:
        last = messages[-1]
        if agent == "triage" and last["role"] == "user" and "refund" in str(last["content"]):
            return assistant_calls(("lookup_account", {"customer": "ada"}))
        if agent == "triage" and last["role"] == "tool":
            return assistant_calls(
                ("transfer_to_billing", {"reason": "double charge on invoice 7"})
            )
        if agent == "billing" and last["role"] == "user" and "transfer_to_billing" in str(last):
            return assistant_calls(("refund", {"invoice": 7}))
        if agent == "billing" and last["role"] == "tool":
            return assistant_calls(("transfer_back", {"reason": "refund done"}))
        if agent == "triage":
            return assistant_text("Your refund for invoice 7 is on its way.")
        raise AssertionError(f"{agent} was not expected to answer {last}")

    return answer
