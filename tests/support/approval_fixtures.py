"""Tools, a model and specs shared by the human-in-the-loop tests (pure and on the
real server)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable_agent._spec.tools import ApprovalMode
from durable_agent._tools.functions import approval_predicate, escalation_notifier, tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import assistant_calls, assistant_text

Call = tuple[str, dict[str, Any]]


def payments_registry(
    ran: list[tuple[str, dict[str, Any]]],
    notices: list[Any],
    transfer_approval: ApprovalMode = "always",
) -> Registry:
    """``transfer`` and ``refund`` wait for a person (``transfer_approval="never"``: the
    worker's owner leaves ``transfer`` to the session's spec); ``lookup`` does not. What
    ran is appended to ``ran``; escalation notices to ``notices``."""
    registry = Registry()

    @tool(registry=registry, approval=transfer_approval)
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        ran.append(("transfer", {"to": to, "amount": amount}))
        return f"sent {amount} to {to}"

    @tool(
        registry=registry,
        approval="always",
        describe=lambda args: f"Refund invoice {args['invoice']} to the customer's card",
    )
    def refund(invoice: int) -> str:
        """Refund an invoice."""
        ran.append(("refund", {"invoice": invoice}))
        return f"refunded invoice {invoice}"

    @tool(registry=registry)
    def lookup(customer: str) -> str:
        """Look a customer up."""
        ran.append(("lookup", {"customer": customer}))
        return f"{customer}: good standing"

    @approval_predicate(registry=registry)
    def known_payee(tool_name: str, arguments: dict[str, Any]) -> bool:
        return str(arguments.get("to", "")).startswith("acct-")

    @escalation_notifier(registry=registry)
    def page_oncall(notice: Any) -> None:
        notices.append(notice)

    return registry


def batch_then_text(*batches: list[Call]) -> Callable[[list[dict[str, Any]]], AssistantMessage]:
    """The model makes each batch in turn (one per user message), and after each batch's
    results says what it read: every tool result's content, joined."""

    def answer(messages: list[dict[str, Any]]) -> AssistantMessage:
        users = sum(1 for m in messages if m["role"] == "user")
        if messages[-1]["role"] == "user":
            return assistant_calls(*batches[min(users, len(batches)) - 1])
        results = []
        for m in reversed(messages):
            if m["role"] != "tool":
                break
            results.insert(0, m["content"])
        return assistant_text(" | ".join(results))

    return answer
