"""The errors a user meets first, each a sentence that names the fix: a spec the worker
refuses, a start given the wrong thing, an ended session read with no worker (from the
CLI and the gateway), and the CLI's output cut short by ``| head``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import Agent, AgentClient, ModelSpec, user_message
from durable_agent._client.results import SessionFailedError, SpecError
from durable_agent._contracts.boundary import AgentRunError
from durable_agent._tools.registry import Registry
from durable_agent.capabilities import Capabilities
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.project.test_cli import address_of, cli
from tests.support.agent_harness import running_worker, spec_for
from tests.support.gateway_harness import ROOT, gateway

NOWHERE = Agent(name="nowhere", model=ModelSpec(name="m", endpoint="not-registered"))


async def test_a_run_the_worker_refuses_raises_the_reason_first(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    agents = AgentClient(temporal_env.client, task_queue=task_queue)
    async with running_worker(temporal_env, task_queue, Registry(), capabilities=Capabilities()):
        with pytest.raises(SessionFailedError) as refused:
            await agents.run(NOWHERE, "hello")
    error = refused.value
    assert isinstance(error, AgentRunError), "catching AgentRunError catches it"
    assert str(error).startswith("this worker does not admit the session's spec"), str(error)
    assert "'not-registered'" in str(error) and "register what it names" in str(error)
    assert error.kind == "NotAdmitted" and error.result.status == "failed"


async def test_a_start_given_something_else_says_what_it_takes(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    agents = AgentClient(temporal_env.client, task_queue=task_queue)
    with pytest.raises(SpecError, match="starts from an Agent, an AgentSpec, a dict or JSON"):
        await agents.start(42, "hello")  # type: ignore[arg-type]
    listed = await temporal_env.client.count_workflows(f"TaskQueue = '{task_queue}'")
    assert listed.count == 0, "nothing started"


async def test_an_ended_session_with_no_worker_is_a_sentence_and_503(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The session ended, and its worker stopped: Temporal refuses a query at once ("no
    poller seen"). The CLI says which worker is missing, exit 2, no traceback; the
    gateway answers 503 (the service is unavailable), as documented."""
    with ScriptedProvider([assistant_text("done")]) as provider:
        spec = tmp_path / "spec.json"
        spec.write_text(spec_for(provider).model_dump_json())
        address = address_of(temporal_env)
        with gateway(address, task_queue, spec) as base:
            async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                async with running_worker(temporal_env, task_queue, Registry()):
                    started = await http.post("/api/sessions", json={"message": "hi"})
                    assert started.status_code == 201, started.text
                    sid = started.json()["session_id"]
                    agents = AgentClient(temporal_env.client, task_queue=task_queue)
                    await asyncio.wait_for(agents.session(sid).result(), 60)
                read = await http.get(f"/api/sessions/{sid}/status")
        status = await asyncio.to_thread(
            cli, "status", sid, "--task-queue", task_queue, address=address
        )
    assert read.status_code == 503, read.text
    assert "no worker" in read.json()["error"]
    assert status.returncode == 2, status.stderr
    assert "Traceback" not in status.stderr
    assert status.stderr.startswith("durable-agent: no worker answered for session"), status.stderr


async def test_output_cut_short_by_head_ends_quietly(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """``durable-agent history ID | head -1`` on a conversation longer than a pipe holds:
    head closes the pipe early, and the CLI ends without a word on stderr."""
    history = [user_message(f"note {i}: " + "x" * 300) for i in range(400)]  # about 130 KB
    with ScriptedProvider([assistant_text("done")]) as provider:
        agents = AgentClient(temporal_env.client, task_queue=task_queue)
        async with running_worker(temporal_env, task_queue, Registry()):
            sid = await agents.start(spec_for(provider), "sum up", history=history)
            await asyncio.wait_for(agents.session(sid).result(), 60)
            command = (
                f"{sys.executable} -m durable_agent._cli.main history {sid}"
                f" --task-queue {task_queue} | head -1"
            )
            env = {**os.environ, "TEMPORAL_ADDRESS": address_of(temporal_env)}
            done = await asyncio.to_thread(
                subprocess.run,
                ["sh", "-c", command],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
    assert done.stdout.count("\n") == 1, done.stdout[:500]
    assert done.stderr == "", done.stderr[-2000:]


async def test_a_worker_whose_endpoint_lacks_its_key_says_so_at_start(
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    temporal_env: WorkflowEnvironment,
    task_queue: str,
) -> None:
    """Said when the worker is made, not at a session's first call; a replay (the
    gate) makes no worker and says nothing."""
    from temporalio.worker import Replayer, Worker

    from durable_agent.capabilities import Capabilities, ProviderEndpoint
    from durable_agent.temporal import DurableAgentPlugin

    monkeypatch.delenv("UNSET_KEY_FOR_THIS_TEST", raising=False)
    endpoint = ProviderEndpoint(
        base_url="https://api.example.com/v1", api_key_env="UNSET_KEY_FOR_THIS_TEST"
    )
    capabilities = Capabilities(models={"x": endpoint})
    plugin = DurableAgentPlugin(preload_tokenizers=False, capabilities=capabilities)
    Replayer(workflows=[], plugins=[plugin])
    quiet = capfd.readouterr()
    Worker(temporal_env.client, task_queue=task_queue, plugins=[plugin])
    said = capfd.readouterr()
    lines = said.out + said.err
    assert "key variable is unset" in lines and "UNSET_KEY_FOR_THIS_TEST" in lines
    assert "key variable" not in quiet.out + quiet.err
