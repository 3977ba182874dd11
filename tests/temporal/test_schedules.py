"""Scheduled agents on Temporal Schedules: three runs of an agent, each a one-shot
session of its own id listed under its schedule; a run due while the last one still
runs is skipped (the ``skip`` policy) or started beside it (``allow_all``, by a
backfill); pause and delete; the CLI's entry points."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import running_worker, spec_for, wait_for


async def test_a_schedule_starts_runs_and_skips_one_due_while_the_last_runs(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    held = threading.Event()

    def answer(request: RecordedRequest) -> AssistantMessage:
        assert held.wait(60)
        return assistant_text("the report is ready")

    name = f"nightly-{task_queue}"
    with ScriptedProvider(responder=answer) as provider:
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            with pytest.raises(ValueError, match="needs cron expressions or an interval"):
                await agents.schedules.create(name, spec_for(provider, []), "report")
            await agents.schedules.create(
                name,
                spec_for(provider, [], session={}),
                "write the report",
                every=timedelta(hours=12),
                overlap="skip",
                owner="ops",
            )
            await agents.schedules.trigger(name)
            first = await wait_for(lambda: _runs(agents, name, 1), timeout=60)
            await wait_for(lambda: _requests(provider, 1), timeout=60)
            await agents.schedules.trigger(name)  # due while the first runs: skipped
            await wait_for(lambda: _skipped(client, name), timeout=60)
            held.set()
            assert (await agents.session(first[0].session_id).result()).status == "done"
            for count in (2, 3):
                # a run's id ends with the second it was due: one second apart, two ids
                await asyncio.sleep(1.1)
                await agents.schedules.trigger(name)
                runs = await wait_for(lambda c=count: _runs(agents, name, c), timeout=60)
                assert (await agents.session(runs[0].session_id).result()).status == "done"
            runs = await agents.schedules.runs(name)
            assert len({r.session_id for r in runs}) == 3
            assert all(r.session_id.startswith(f"{name}-run") for r in runs)
            assert {await agents.session(r.session_id).owner() for r in runs} == {"ops"}
            listed = [s for s in await agents.schedules.list() if s.name == name]
            assert listed and not listed[0].paused and listed[0].next_runs
            await agents.schedules.pause(name, "holiday")
            paused = next(s for s in await agents.schedules.list() if s.name == name)
            assert paused.paused and paused.note == "holiday"
            await agents.schedules.delete(name)
            assert name not in [s.name for s in await agents.schedules.list()]
    assert len(provider.requests) == 3  # the skipped run asked nothing


async def test_a_backfill_with_allow_all_starts_every_missed_run_and_the_cli_lists_them(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Any
) -> None:
    name = f"hourly-{task_queue}"
    with ScriptedProvider(responder=lambda request: assistant_text("done")) as provider:
        spec = tmp_path / "spec.json"
        spec.write_text(spec_for(provider, []).model_dump_json())
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            address = address_of(temporal_env)
            common = ("--task-queue", task_queue)
            made = await acli(
                "schedule",
                "create",
                name,
                "--spec",
                str(spec),
                "--message",
                "tidy up",
                "--every",
                "1h",
                "--paused",
                *common,
                address=address,
            )
            assert made.returncode == 0, made.stderr
            end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
            start = end - timedelta(hours=3)
            filled = await acli(
                "schedule",
                "backfill",
                name,
                "--start",
                start.isoformat(),
                "--end",
                (end - timedelta(seconds=1)).isoformat(),
                "--overlap",
                "allow_all",
                *common,
                address=address,
            )
            assert filled.returncode == 0, filled.stderr
            runs = await wait_for(lambda: _runs(agents, name, 3), timeout=60)
            for run in runs:
                assert (await agents.session(run.session_id).result()).status == "done"
            shown = await acli("schedule", "runs", name, *common, address=address)
            assert shown.returncode == 0, shown.stderr
            assert sum(name in line for line in shown.stdout.splitlines()) == 3
            listed = await acli("schedule", "list", *common, address=address)
            assert f"{name}" in listed.stdout and "paused" in listed.stdout
            bad = await acli(
                "schedule",
                "create",
                "no spaces allowed",
                "--spec",
                str(spec),
                "--message",
                "x",
                "--every",
                "1h",
                *common,
                address=address,
            )
            assert bad.returncode != 0 and "schedule name" in bad.stderr
            await agents.schedules.delete(name)
    assert len(provider.requests) == 3


async def _runs(agents: AgentClient, name: str, count: int) -> Any:
    runs = await agents.schedules.runs(name)
    return runs if len(runs) >= count else None


async def _requests(provider: ScriptedProvider, count: int) -> bool:
    return len(provider.requests) >= count


async def _skipped(client: Any, name: str) -> bool:
    described = await client.get_schedule_handle(name).describe()
    return bool(described.info.num_actions_skipped_overlap >= 1)
