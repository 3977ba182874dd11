"""durable-agent's workflows run outside temporalio's sandbox, and replay inside it.

Production skips the sandbox's cost (``durable_agent.temporal._plugin``); the replay tests and
``check-replay`` put the same workflows in the sandbox, so code that reads the clock
fails there. These tests show which runner takes which workflow, by effect: a probe
workflow that reads the clock fails when the sandbox takes it, and runs when not."""

from __future__ import annotations

import argparse
import json
import uuid
from pathlib import Path
from typing import ClassVar

import pytest
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker, WorkflowInstance, WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from durable_agent._cli.args import add_worker_arguments
from durable_agent.temporal import DurableAgentPlugin, build_worker
from durable_agent.temporal._plugin import SandboxingOurs, sandboxing_ours
from tests.support.clock_probe import CLOCK_PROBE, ClockProbe

HISTORIES = Path(__file__).parent.parent / "histories"


class CountingSandbox(SandboxedWorkflowRunner):
    """The sandbox, noting the workflows it made instances of (it makes one of each at
    start, to check the definition, and one per run)."""

    created: ClassVar[list[str]] = []

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        CountingSandbox.created.append(det.defn.name or "")
        return super().create_instance(det)


async def _replay_in(sandboxed: bool) -> set[str]:
    CountingSandbox.created.clear()
    plugin = DurableAgentPlugin(preload_tokenizers=False, sandboxed=sandboxed)
    replayer = Replayer(workflows=[], plugins=[plugin], workflow_runner=CountingSandbox())
    text = (HISTORIES / "parallel_batch.json").read_text()
    history = WorkflowHistory.from_json("parallel-batch", json.loads(text))
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, result.replay_failure
    return set(CountingSandbox.created)


async def test_sessions_replay_in_the_sandbox_only_when_asked() -> None:
    ours = {"AgentWorkflow", "durable-agent-limiter", "durable-agent-eval"}
    assert await _replay_in(sandboxed=True) == ours
    assert await _replay_in(sandboxed=False) == set()


async def test_a_workflow_reading_the_clock_fails_in_the_sandbox_it_is_routed_to(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The owner's own ``sandboxed=False`` workflow on a worker whose plugin sandboxes
    durable-agent's: it keeps its runner and completes. Its history, replayed with the
    probe routed into the sandbox as ours are, fails on the clock read."""
    plugin = DurableAgentPlugin(preload_tokenizers=False, sandboxed=True)
    async with Worker(
        temporal_env.client, task_queue=task_queue, workflows=[ClockProbe], plugins=[plugin]
    ):
        handle = await temporal_env.client.start_workflow(
            CLOCK_PROBE, id=f"probe-{uuid.uuid4().hex[:8]}", task_queue=task_queue, result_type=str
        )
        assert "T" in await handle.result()  # an ISO time: the clock was read, no sandbox
    history = await handle.fetch_history()

    routed = Replayer(
        workflows=[ClockProbe],
        unsandboxed_workflow_runner=sandboxing_ours([CLOCK_PROBE], None, None),
    )
    failed = await routed.replay_workflow(history, raise_on_replay_failure=False)
    assert failed.replay_failure is not None
    assert "datetime.datetime.now" in str(failed.replay_failure), failed.replay_failure

    left = Replayer(
        workflows=[ClockProbe],
        unsandboxed_workflow_runner=sandboxing_ours(["AgentWorkflow"], None, None),
    )
    kept = await left.replay_workflow(history, raise_on_replay_failure=False)
    assert kept.replay_failure is None, kept.replay_failure


async def test_the_worker_command_asks_for_the_sandbox_with_a_flag(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = argparse.ArgumentParser()
    add_worker_arguments(parser)
    assert parser.parse_args([]).sandboxed is False
    assert parser.parse_args(["--sandboxed"]).sandboxed is True
    monkeypatch.setenv("DURABLE_AGENT_SANDBOXED", "1")
    fresh = argparse.ArgumentParser()
    add_worker_arguments(fresh)
    assert fresh.parse_args([]).sandboxed is True
    # what the flag gives build_worker: ours routed into the sandbox (shown above by effect)
    worker = build_worker(
        temporal_env.client, task_queue=task_queue, preload_tokenizers=False, sandboxed=True
    )
    assert isinstance(
        worker.config(active_config=True)["unsandboxed_workflow_runner"], SandboxingOurs
    )
    other_queue = f"{task_queue}-plain"  # one worker a queue per process
    plain = build_worker(temporal_env.client, task_queue=other_queue, preload_tokenizers=False)
    assert not isinstance(
        plain.config(active_config=True)["unsandboxed_workflow_runner"], SandboxingOurs
    )
