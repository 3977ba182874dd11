"""``DurableAgentPlugin`` on plain temporalio clients, workers and replayers: one object
wires the converter, the workflow, the activities and the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from durable_agent import AgentClient, ToolRegistry, tool
from durable_agent.plugin import DurableAgentPlugin
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.worker import build_worker
from tests.support.agent_harness import LOCAL_DEVELOPMENT, spec_for
from tests.test_cli import address_of

registry = ToolRegistry()
HISTORIES = Path(__file__).parent / "histories"


@tool(registry=registry)
def stock(item: str) -> str:
    """How many of an item are in stock."""
    return {"tea": "12"}.get(item, "0")


def _script() -> list[object]:
    return [assistant_calls(("stock", {"item": "tea"})), assistant_text("12 teas in stock")]


async def test_a_plugin_on_the_client_makes_every_worker_run_sessions(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    plugin = DurableAgentPlugin(
        registry=registry, preload_tokenizers=False, capabilities=LOCAL_DEVELOPMENT
    )
    client = await Client.connect(address_of(temporal_env), plugins=[plugin])
    with ScriptedProvider(_script()) as provider:  # type: ignore[arg-type]
        async with Worker(client, task_queue=task_queue):  # nothing else to pass
            agents = AgentClient(client, task_queue=task_queue)
            result = await agents.result(await agents.start(spec_for(provider, ["stock"]), "tea?"))
    assert result.status == "done" and result.final is not None
    assert result.final.content == "12 teas in stock"
    tool_result = provider.requests[1].body["messages"][-1]
    assert tool_result == {"role": "tool", "tool_call_id": "call_0", "content": "12"}
    with pytest.raises(ValueError, match="made with DurableAgentPlugin"):
        build_worker(client, task_queue=task_queue, preload_tokenizers=False)


async def test_a_plugin_on_a_worker_of_a_plain_client(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A client made without the plugin (temporalio's default converter): the worker
    runs sessions all the same, on a client with the pydantic converter."""
    plain = await Client.connect(address_of(temporal_env))
    plugin = DurableAgentPlugin(
        registry=registry, preload_tokenizers=False, capabilities=LOCAL_DEVELOPMENT
    )
    with ScriptedProvider(_script()) as provider:  # type: ignore[arg-type]
        worker = Worker(plain, task_queue=task_queue, plugins=[plugin])
        assert plain.data_converter.payload_converter_class is not PydanticPayloadConverter
        converter = worker.client.data_converter.payload_converter_class
        assert issubclass(converter, PydanticPayloadConverter)
        async with worker:
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            result = await agents.result(await agents.start(spec_for(provider, ["stock"]), "tea?"))
    assert result.status == "done" and result.final is not None
    assert result.final.content == "12 teas in stock"


async def test_a_replayer_with_the_plugin_replays_a_recorded_session() -> None:
    replayer = Replayer(workflows=[], plugins=[DurableAgentPlugin(preload_tokenizers=False)])
    text = (HISTORIES / "parallel_batch.json").read_text()
    history = WorkflowHistory.from_json("parallel-batch", json.loads(text))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
