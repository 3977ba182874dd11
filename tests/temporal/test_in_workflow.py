"""An agent session run from inside a user's own workflow: a child session whose call
waits for an approval given by signal on the child's id, while the parent's history
holds only the child's start and result."""

from __future__ import annotations

import base64
import json
import uuid

from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agent import AgentClient, Registry, tool
from durable_agent.temporal import DurableAgentPlugin
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import LOCAL_DEVELOPMENT, spec_for
from tests.support.order_workflow import OrderWorkflow

registry = Registry()
refunds: list[str] = []


@tool(registry=registry, approval="always")
def refund(order_id: str) -> str:
    """Refund an order (a person approves each one)."""
    refunds.append(order_id)
    return f"refund issued for {order_id} under ticket RF-{order_id}"


async def test_an_order_workflow_runs_an_agent_whose_call_is_approved_by_signal(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    refunds.clear()
    script = [assistant_calls(("refund", {"order_id": "o-17"})), assistant_text("Refunded o-17.")]
    client = temporal_env.client
    plugin = DurableAgentPlugin(
        registry=registry, preload_tokenizers=False, capabilities=LOCAL_DEVELOPMENT
    )
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["refund"])
        async with Worker(
            client, task_queue=task_queue, workflows=[OrderWorkflow], plugins=[plugin]
        ):
            order = await client.start_workflow(
                OrderWorkflow.run,
                args=["o-17", spec],
                id=f"order-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
            child = f"{order.id}--refund-check"
            agents = AgentClient(client, task_queue=task_queue)
            await agents.session(child).started(timeout=60)
            asked = await agents.session(child).wait(timeout=60)
            assert asked.kind == "approval" and refunds == [], "nothing runs before a person"
            signal = {"approval_id": asked.pending[0].approval_id, "by": "ana"}
            await client.get_workflow_handle(child).signal("approve", signal)
            answer = await order.result()
            parent_history = await order.fetch_history()
            parent = _payloads(parent_history)
            session = _payloads(await client.get_workflow_handle(child).fetch_history())
    assert answer == "order o-17: Refunded o-17."
    assert refunds == ["o-17"]
    assert "RF-o-17" in session and "RF-o-17" not in parent, "the conversation stays in the child"
    # the parent: its start, the child's start and end, its answer (besides workflow
    # tasks, and the child's reports of approvals waiting: a signal each time they
    # change), however long the child's conversation was
    kinds = [
        e.WhichOneof("attributes").removesuffix("_event_attributes") for e in parent_history.events
    ]
    assert kinds.count("workflow_execution_signaled") == 2, kinds  # asked, then decided
    assert [
        k for k in kinds if not k.startswith(("workflow_task_", "workflow_execution_signaled"))
    ] == [
        "workflow_execution_started",
        "start_child_workflow_execution_initiated",
        "child_workflow_execution_started",
        "child_workflow_execution_completed",
        "workflow_execution_completed",
    ], kinds


def _payloads(history: WorkflowHistory) -> str:
    """Every payload in a history, decoded: what the history holds, as text."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "data" and isinstance(value, str):
                    found.append(base64.b64decode(value).decode(errors="replace"))
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(history.to_json()))
    return "\n".join(found)


async def test_a_tool_defined_beside_a_sandboxed_workflow_runs(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The sandbox imports the workflow's module again for every run, and with it the
    tool: making one registers nothing, so nothing clashes, and the worker runs the tool
    its registry was given."""
    from tests.support import tool_beside_workflow as beside

    beside.looked_up.clear()
    script = [assistant_calls(("stock_level", {"sku": "mug"})), assistant_text("12 mugs left.")]
    plugin = DurableAgentPlugin(
        registry=Registry([beside.stock_level]),
        preload_tokenizers=False,
        capabilities=LOCAL_DEVELOPMENT,
    )
    client = temporal_env.client
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["stock_level"])
        async with Worker(
            client, task_queue=task_queue, workflows=[beside.StockWorkflow], plugins=[plugin]
        ):
            answer = await client.execute_workflow(
                beside.StockWorkflow.run,
                args=["mug", spec],
                id=f"stock-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
    assert answer == "12 mugs left."
    assert beside.looked_up == ["mug"]  # the tool ran, once, on the worker
    tool_result = provider.requests[1].body["messages"][-1]
    assert tool_result["content"] == "mug: 12 in stock"
