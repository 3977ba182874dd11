"""A spec that names a tool its worker lacks (a typo, most often) fails at start, and
says which tool was meant and what the worker has: in Python and from the CLI alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client.results import SessionFailedError
from durable_agent._errors import Failure
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.project.test_cli import acli, address_of, registry, write_spec
from tests.support.agent_harness import running_worker, spec_for

SAID = (
    "spec.tools names tools that no worker has loaded: get_tme (did you mean get_time?), "
    "launch_rockets; the worker that looked has get_time, wipe_cache"
)
NEXT = "load the tool's module on the worker (--tools, or the agent's tools)"


async def test_python_names_the_closest_tool_and_the_workers_tools(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("never asked")]) as provider:
        spec = spec_for(provider, ["get_tme", "launch_rockets"])
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session_id = await agents.start(spec, "what time is it?")
            with pytest.raises(SessionFailedError) as failed:
                await agents.session(session_id).result()
    assert failed.value.kind == Failure.UNKNOWN_TOOL
    assert str(failed.value) == f"{SAID} (session {session_id} failed: {NEXT})"
    assert provider.requests == [], "no model call for a session that cannot start"


async def test_the_cli_prints_the_whole_sentence(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    with ScriptedProvider([assistant_text("never asked")]) as provider:
        spec = write_spec(tmp_path, provider, ["get_tme", "launch_rockets"])
        async with running_worker(temporal_env, task_queue, registry):
            run = await acli(
                "run",
                "--spec",
                spec,
                "--task-queue",
                task_queue,
                "--session-id",
                f"typo-{task_queue}",
                "what time is it?",
                address=address_of(temporal_env),
            )
    assert run.returncode == 1, run.stderr
    assert f"session failed: {SAID} (session typo-{task_queue} failed: {NEXT})" in run.stdout
    assert "UnknownTool:" not in run.stdout and "Traceback" not in run.stderr
    assert provider.requests == []
