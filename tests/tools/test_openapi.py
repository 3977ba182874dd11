"""OpenAPI tools on the real server, against a real HTTP service on 127.0.0.1 that serves
its own document: one tool per operation, arguments to path, query, header and JSON
body, non-2xx answers as error results, unusable documents refused at start."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import running_worker, spec_for
from tests.support.openapi_service import DOCUMENT, OrdersService

registry = Registry()


@tool(registry=registry)
def createOrder(item: str) -> str:
    """A function tool whose name an operation also has."""
    return item


async def test_operations_become_tools_and_call_the_service(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDERS_API_KEY", "k-123")
    script = [
        assistant_calls(
            ("getOrder", {"order_id": "A 1/2", "verbose": True}),
            ("getOrder", {"order_id": "missing"}),
            ("createOrder", {"body": {"item": "tea", "qty": 2}, "X-Request-Note": "rush"}),
        ),
        assistant_text("Order A 1/2 is tea; o-1 placed."),
    ]
    with OrdersService(api_key="k-123") as service, ScriptedProvider(script) as provider:
        api = {
            "name": "orders",
            "document": f"{service.url}/openapi.json",
            "operations": ["getOrder", "createOrder"],
            "headers": {"X-Api-Key": "ORDERS_API_KEY"},
            "max_result_chars": 200,
        }
        spec = spec_for(provider, [], openapi=[api])
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "look up and order")
            result = await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
    assert result.status == "done"
    found, missing, created = [m for m in messages if isinstance(m, ToolMessage)]
    assert found.content == '{"id": "A 1/2", "item": "tea"}' and not found.is_error
    assert missing.is_error and missing.content == 'HTTP 404 Not Found: {"error": "no such order"}'
    assert created.content == '{"id": "o-1", "item": "tea", "qty": 2}'
    expected = [
        {"get": "A 1/2", "query": {"verbose": ["true"]}},
        {"get": "missing", "query": {}},
        {"post": {"item": "tea", "qty": 2}, "note": "rush", "key_ok": True},
    ]  # the three calls ran in parallel: any order
    assert sorted(map(repr, service.seen)) == sorted(map(repr, expected))
    tools = {t["function"]["name"]: t["function"] for t in provider.requests[0].body["tools"]}
    assert set(tools) == {"getOrder", "createOrder"}
    create = tools["createOrder"]["parameters"]
    assert create["required"] == ["body"]
    assert create["properties"]["body"]["required"] == ["item", "qty"]  # $ref resolved
    assert tools["getOrder"]["parameters"]["required"] == ["order_id"]


async def test_a_yaml_file_document_and_a_binary_answer(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [assistant_calls(("getLabel", {"order_id": "o-1"})), assistant_text("label ok")]
    with OrdersService(api_key="k") as service, ScriptedProvider(script) as provider:
        document = tmp_path / "orders.yaml"
        document.write_text(yaml.safe_dump(DOCUMENT))
        api = {
            "name": "orders",
            "document": str(document),
            "base_url": f"{service.url}/api",  # a file's relative servers URL needs one
            "operations": ["getLabel"],
        }
        spec = spec_for(provider, [], openapi=[api])
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "print the label")
            result = await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
    assert result.status == "done"
    [label] = [m for m in messages if isinstance(m, ToolMessage)]
    assert label.content == "[image/png, 32 bytes, not shown]" and not label.is_error


@pytest.mark.parametrize(
    ("api", "words"),
    [
        ({"document": "/garbage.json"}, "does not parse"),
        ({"operations": ["uploadOrders"]}, "operation 'uploadOrders' (PUT /orders): its request"),
        ({"operations": ["deleteEverything"]}, "operations it does not have: deleteEverything"),
        ({"document": "/nothing.json"}, "cannot read"),
        ({"operations": ["createOrder"]}, "two tools are named 'createOrder'"),
    ],
    ids=["unparseable", "non-JSON body", "unknown operation", "unreachable", "name clash"],
)
async def test_an_unusable_document_fails_the_session_at_start(
    temporal_env: WorkflowEnvironment, task_queue: str, api: dict[str, Any], words: str
) -> None:
    with OrdersService(api_key="k") as service, ScriptedProvider([assistant_text("x")]) as provider:
        document = f"{service.url}{api.pop('document', '/openapi.json')}"
        entry = {"name": "orders", "document": document, **api}
        tools = ["createOrder"] if "two tools" in words else []
        spec = spec_for(provider, tools, openapi=[entry])
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "hello")
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(agents.session(session).result(), 60)
    cause = str(failed.value.cause)
    assert words in cause, cause
    assert not provider.requests
