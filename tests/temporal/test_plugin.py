"""``DurableAgentPlugin`` on plain temporalio clients, workers and replayers: one object
wires the converter, the workflow, the activities and the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    ActivitySlotInfo,
    CustomSlotSupplier,
    FixedSizeSlotSupplier,
    Replayer,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
    Worker,
    WorkerTuner,
)

from durable_agent import AgentClient, Registry, tool
from durable_agent.temporal import DurableAgentPlugin, build_worker
from durable_agent.temporal._plugin import EAGER_ACTIVITIES
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.project.test_cli import address_of
from tests.support.agent_harness import LOCAL_DEVELOPMENT, spec_for

registry = Registry()
HISTORIES = Path(__file__).parent.parent / "histories"


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
            result = await agents.session(
                await agents.start(spec_for(provider, ["stock"]), "tea?")
            ).result()
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
            result = await agents.session(
                await agents.start(spec_for(provider, ["stock"]), "tea?")
            ).result()
    assert result.status == "done" and result.final is not None
    assert result.final.content == "12 teas in stock"


async def test_a_replayer_with_the_plugin_replays_a_recorded_session() -> None:
    replayer = Replayer(workflows=[], plugins=[DurableAgentPlugin(preload_tokenizers=False)])
    text = (HISTORIES / "parallel_batch.json").read_text()
    history = WorkflowHistory.from_json("parallel-batch", json.loads(text))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure


class _Permit(SlotPermit):
    def __init__(self, eager: bool) -> None:
        self.eager = eager


class _ActivitySlots(CustomSlotSupplier):
    """Activity slots without a limit, telling those a workflow task's completion
    reserved (eager: ``try_reserve_slot``) from those reserved to poll the task queue."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, bool]] = []
        """Each activity that ran: its type, and whether its slot was reserved eagerly."""

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        return _Permit(eager=False)

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        return _Permit(eager=True)

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        if isinstance(ctx.slot_info, ActivitySlotInfo) and isinstance(ctx.permit, _Permit):
            self.ran.append((ctx.slot_info.activity_type, ctx.permit.eager))

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        pass


async def test_a_batch_of_calls_starts_with_the_workflow_task_that_scheduled_it(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Six parallel calls all start on the worker with the answer to the task that
    scheduled them (temporalio's default reserves three); a worker given its own
    number of eager slots keeps it, and the rest of the batch is polled for."""
    calls = [("stock", {"item": f"item {n}"}) for n in range(6)]
    eager_runs: list[int] = []
    for own in (None, 2):
        slots = _ActivitySlots()
        fixed = FixedSizeSlotSupplier(50)
        tuner = WorkerTuner.create_composite(
            workflow_supplier=fixed,
            activity_supplier=slots,
            local_activity_supplier=fixed,
            nexus_supplier=fixed,
        )
        plugin = DurableAgentPlugin(
            registry=registry, preload_tokenizers=False, capabilities=LOCAL_DEVELOPMENT
        )
        queue = f"{task_queue}-{own}"
        more = {} if own is None else {"max_eager_activity_reservations_per_workflow_task": own}
        worker = Worker(
            temporal_env.client, task_queue=queue, plugins=[plugin], tuner=tuner, **more
        )
        expected = EAGER_ACTIVITIES if own is None else own
        active = worker.config(active_config=True)
        assert active["max_eager_activity_reservations_per_workflow_task"] == expected
        script = [assistant_calls(*calls), assistant_text("none in stock")]
        with ScriptedProvider(script) as provider:  # type: ignore[arg-type]
            async with worker:
                agents = AgentClient(temporal_env.client, task_queue=queue)
                result = await agents.session(
                    await agents.start(spec_for(provider, ["stock"]), "?")
                ).result()
        assert result.status == "done"
        tools = [eager for kind, eager in slots.ran if kind == "run_tool"]
        assert len(tools) == 6, slots.ran
        eager_runs.append(sum(tools))
    assert eager_runs == [6, 2], eager_runs


def test_eager_activities_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="disable_eager_activity_execution"):
        DurableAgentPlugin(preload_tokenizers=False, eager_activities=0)
