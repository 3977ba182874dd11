"""A deploy costs nothing: a worker stopped by SIGTERM (as a service manager stops it in
a rolling deploy) takes no new work and lets its calls in flight finish before it
exits. Shown by effects, with real worker processes (``durable-agent worker``) on the
real server: a tool in flight at SIGTERM ran once and its session's transcript equals
an undisturbed one; the provider received a model request in flight at SIGTERM once;
a worker with nothing in flight exits at once; each says what it drained."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, ModelSpec
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import Message
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import chat_stream_events, sse_reply
from tests.support.agent_harness import record_history, wait_for

ROOT = Path(__file__).parents[2]


@dataclasses.dataclass
class WorkerProcess:
    process: asyncio.subprocess.Process
    log: Path

    def said(self) -> str:
        return self.log.read_text()

    async def stopped(self) -> int:
        return await asyncio.wait_for(self.process.wait(), 120)


@asynccontextmanager
async def worker(
    env: WorkflowEnvironment, task_queue: str, provider: ScriptedProvider, folder: Path, name: str
) -> AsyncIterator[WorkerProcess]:
    """``durable-agent worker`` in its own process (its log in ``folder/name.log``),
    ready; killed at the end if a test left it running."""
    capabilities = folder / "capabilities.toml"
    capabilities.write_text(
        f'[models.scripted]\nbase_url = "{provider.base_url}"\napi_key_env = ""\n'
    )
    log = folder / f"{name}.log"
    address = str(env.client.service_client.config.target_host)
    command = [
        *(sys.executable, "-m", "durable_agent._cli.main", "worker", "--address", address),
        *("--task-queue", task_queue, "--tools", "tests.support.deploy_tools"),
        *("--capabilities", str(capabilities), "--data-dir", str(folder / name)),
    ]
    with log.open("w") as out:
        process = await asyncio.create_subprocess_exec(
            *command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ)
        )
    running = WorkerProcess(process, log)
    try:
        await wait_for(lambda: _said(running, "worker ready"), timeout=120)
        yield running
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _said(worker: WorkerProcess, text: str) -> bool:
    if worker.process.returncode is not None and text not in worker.said():
        raise AssertionError(f"the worker exited: {worker.said()[-2000:]}")
    return text in worker.said()


def spec() -> AgentSpec:
    model = ModelSpec(name="scripted-model", endpoint="scripted", max_attempts=1)
    return AgentSpec.model_validate(
        {"model": model, "tools": ["migrate"], "session": {"end_after_reply": True}}
    )


def shape(messages: list[Message]) -> list[tuple[Any, ...]]:
    """A transcript as its reader sees it: roles, texts and calls, in order."""
    return [
        (
            m.role,
            m.content,
            [(c.function.name, c.function.arguments) for c in getattr(m, "tool_calls", None) or []],
        )
        for m in messages
    ]


def _events(history: Any, kind: str) -> int:
    return sum(e.WhichOneof("attributes") == f"{kind}_event_attributes" for e in history.events)


async def test_a_tool_in_flight_at_sigterm_finishes_once_and_the_session_goes_on(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path, monkeypatch: Any
) -> None:
    ledger, release = tmp_path / "ledger.txt", tmp_path / "release"
    monkeypatch.setenv("DEPLOY_LEDGER", str(ledger))
    monkeypatch.setenv("DEPLOY_RELEASE", str(release))
    script = [assistant_calls(("migrate", {"table": "users"})), assistant_text("migrated")]
    client = temporal_env.client
    agents = AgentClient(client, task_queue=task_queue)
    with ScriptedProvider(script * 2) as provider:
        async with worker(temporal_env, task_queue, provider, tmp_path, "a") as old:
            session = await agents.start(spec(), "migrate users")
            await wait_for(lambda: _in(ledger, "start users"), timeout=60)
            async with worker(temporal_env, task_queue, provider, tmp_path, "b") as new:
                old.process.send_signal(signal.SIGTERM)
                await wait_for(lambda: _said(old, "in_flight=1"), timeout=60)
                running_while_stopping = ledger.read_text()
                release.touch()  # the tool may finish now, on the stopping worker
                code = await old.stopped()
                result = await agents.session(session).result()
                messages = await agents.session(session).messages()
                history = await client.get_workflow_handle(session).fetch_history()
                await record_history(client.get_workflow_handle(session), "moved_by_a_deploy")
                # the same conversation, undisturbed, for the reference
                calm = agents.session(await agents.start(spec(), "migrate users"))
                await calm.result()
                undisturbed = await calm.messages()
    assert running_while_stopping == "start users\n", "it was in flight at SIGTERM"
    assert code == 0
    assert ledger.read_text().count("start users") == 2, "once here, once in the reference"
    assert ledger.read_text().splitlines()[:2] == ["start users", "done users"]
    assert result.status == "done" and shape(messages) == shape(undisturbed)
    said = old.said()
    assert "calls=run_tool" in said and "finished_while_draining=1" in said, said[-2000:]
    assert "handed_over=0" in said
    # the session went on at once on the other worker: no task waited for a timeout
    assert _events(history, "workflow_task_timed_out") == 0
    assert _events(history, "activity_task_timed_out") == 0
    # the new worker, with a store of its own, was sent what it lacked: no call failed
    assert _events(history, "activity_task_failed") == 0
    assert "lacks=['setup', 'transcript']" in new.said()
    assert "Traceback" not in new.said() and "Unknown" not in new.said(), new.said()[-2000:]


async def test_a_model_call_in_flight_at_sigterm_is_sent_once(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    asked = threading.Event()
    reply = sse_reply(chat_stream_events(assistant_text("all tables are fine")))
    held = dataclasses.replace(reply, hold=asked, hold_after=2)
    agents = AgentClient(temporal_env.client, task_queue=task_queue)
    with ScriptedProvider([held]) as provider:
        async with worker(temporal_env, task_queue, provider, tmp_path, "a") as old:
            session = await agents.start(spec(), "are the tables fine?")
            await wait_for(lambda: _async(len(provider.requests) == 1), timeout=60)
            async with worker(temporal_env, task_queue, provider, tmp_path, "b"):
                old.process.send_signal(signal.SIGTERM)
                await wait_for(lambda: _said(old, "in_flight=1"), timeout=60)
                asked.set()  # the reply streams on to the stopping worker
                code = await old.stopped()
                result = await agents.session(session).result()
    assert code == 0 and result.status == "done"
    assert result.final is not None and result.final.content == "all tables are fine"
    assert len(provider.requests) == 1, "the provider was asked once"
    assert "calls=call_model" in old.said() and "finished_while_draining=1" in old.said()


async def test_a_worker_with_nothing_in_flight_stops_at_once(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    with ScriptedProvider([]) as provider:
        async with worker(temporal_env, task_queue, provider, tmp_path, "idle") as idle:
            idle.process.send_signal(signal.SIGTERM)
            # far sooner than its 120 s drain: nothing holds it
            code = await asyncio.wait_for(idle.process.wait(), 60)
    assert code == 0
    assert "in_flight=0" in idle.said() and "handed_over=0" in idle.said()


async def _in(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text()


async def _async(value: bool) -> bool:
    return value
