"""Running sessions in tests the way a user does: real server, worker, scripted provider."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from durable_agent._contracts.boundary import AgentResult, SessionStatus
from durable_agent._spec.document import AgentInput, AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import Message, ToolMessage, UserMessage
from durable_agent.capabilities import Capabilities
from durable_agent.temporal import build_worker
from durable_agent.temporal._local import temporal_binary
from durable_agent.testing import ScriptedProvider

#: The policy of a developer's own machine: these tests' specs carry the scripted model's
#: loopback endpoint, MCP commands and OpenAPI documents, as the starter owns the worker.
#: The trust tests (test_capabilities) run strict workers instead.
LOCAL_DEVELOPMENT = Capabilities.development()

#: The heartbeat timeout of tests that SIGKILL a worker: short, so the lost call is
#: retried in seconds, but not 2 s: beside a second copy of the suite the retry on the
#: fresh worker missed its heartbeats too, and asked the model for a reply a script
#: did not have.
KILL_HEARTBEAT_SECONDS = 5


def spec_for(
    provider: ScriptedProvider, tools: Sequence[str | dict[str, Any]] = (), **kw: Any
) -> AgentSpec:
    model = ModelSpec(
        name="scripted-model",
        endpoint=ProviderEndpoint(base_url=provider.base_url, api_key_env=None),
        max_attempts=kw.pop("max_attempts", 2),
        initial_retry_seconds=0.1,
    )
    kw.setdefault("session", {"end_after_reply": True})  # most tests follow one reply
    return AgentSpec.model_validate({"model": model.model_dump(), "tools": list(tools), **kw})


def default_spec(
    provider: ScriptedProvider, tools: Sequence[str | dict[str, Any]] = (), **kw: Any
) -> AgentSpec:
    """A spec with every setting at the project's default but where the model is."""
    endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
    model = ModelSpec(name="scripted-model", endpoint=endpoint)
    return AgentSpec.model_validate({"model": model.model_dump(), "tools": list(tools), **kw})


@asynccontextmanager
async def running_worker(
    env: WorkflowEnvironment,
    task_queue: str,
    registry: Registry,
    client: Client | None = None,
    **options: Any,
) -> AsyncIterator[Client]:
    """A worker of ``registry``'s tools on the test server (through ``client``: one that
    encrypts, say; the environment's own by default)."""
    # tests that count with a tokenizer load it themselves (load_tokenizers)
    options.setdefault("capabilities", LOCAL_DEVELOPMENT)
    client = client or env.client
    async with build_worker(
        client, task_queue=task_queue, registry=registry, preload_tokenizers=False, **options
    ):
        yield client


def start_worker_process(
    env: WorkflowEnvironment,
    task_queue: str,
    *args: str,
    stderr: Path | None = None,
    trust_specs: bool = True,
    **extra_env: str,
) -> subprocess.Popen[str]:
    """``durable-agent worker`` in its own process (the tools of ``tests.support.cli_tools``),
    the way users start it, with ``args`` added (its log lines to ``stderr``), once it
    says it is ready; ``trust_specs``: the local-development policy (these tests' specs
    carry the scripted model's loopback endpoint)."""
    address = str(env.client.service_client.config.target_host)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durable_agent._cli.main",
            "worker",
            "--tools",
            "tests.support.cli_tools",
            "--task-queue",
            task_queue,
            "--transcript-store",
            "memory:",
            "--log-level",
            "warning",
            *(["--trust-specs"] if trust_specs else []),
            *args,
        ],
        cwd=Path(__file__).parents[2],
        env={**os.environ, "TEMPORAL_ADDRESS": address, **extra_env},
        stdout=subprocess.PIPE,
        text=True,
        stderr=stderr.open("w") if stderr is not None else None,
    )
    assert process.stdout is not None
    assert "worker ready" in process.stdout.readline()
    return process


@contextmanager
def worker_process(
    env: WorkflowEnvironment,
    task_queue: str,
    *args: str,
    stderr: Path | None = None,
    trust_specs: bool = True,
    **extra_env: str,
) -> Iterator[None]:
    """``start_worker_process``, stopped when the block ends."""
    process = start_worker_process(
        env, task_queue, *args, stderr=stderr, trust_specs=trust_specs, **extra_env
    )
    try:
        yield
    finally:
        process.terminate()
        process.wait(15)


async def start_session(
    client: Client,
    task_queue: str,
    spec: AgentSpec,
    message: str | UserMessage,
    session_id: str | None = None,
) -> WorkflowHandle[Any, AgentResult]:
    return await client.start_workflow(
        "AgentWorkflow",
        AgentInput(spec=spec, message=message),
        id=session_id or f"session-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=AgentResult,
    )


def temporal_cli(env: WorkflowEnvironment, *args: str) -> str:
    """Run the real `temporal` CLI against the test server and return its stdout."""
    address = env.client.service_client.config.target_host
    done = subprocess.run(
        [temporal_binary(), *args, "--address", address, "--namespace", "default"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"temporal {' '.join(args)} failed: {done.stderr}")
    return done.stdout


async def reset_to_first_task(env: WorkflowEnvironment, workflow_id: str) -> None:
    """An operator's reset of the workflow to its first workflow task (`temporal
    workflow reset`): a new run replays that task and goes on from there."""
    await asyncio.to_thread(
        temporal_cli,
        env,
        "workflow",
        "reset",
        "--workflow-id",
        workflow_id,
        "--type",
        "FirstWorkflowTask",
        "--reason",
        "an operator's reset",
    )


async def cli_json(env: WorkflowEnvironment, *args: str) -> Any:
    out = await asyncio.to_thread(temporal_cli, env, *args, "--output", "json")
    return json.loads(out)


async def cli_query(env: WorkflowEnvironment, workflow_id: str, name: str, *arg: str) -> Any:
    """A query answered through the real `temporal workflow query` command."""
    extra = ("--input", *arg) if arg else ()
    answer = await cli_json(
        env, "workflow", "query", "--workflow-id", workflow_id, "--name", name, *extra
    )
    return answer["queryResult"][0]


async def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.1) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)


async def query_messages(handle: WorkflowHandle[Any, Any], from_index: int = 0) -> list[Message]:
    return await handle.query("messages", from_index, result_type=list[Message])  # type: ignore[arg-type]


async def query_status(handle: WorkflowHandle[Any, Any]) -> SessionStatus:
    return await handle.query("status", result_type=SessionStatus)


def tool_messages(messages: Sequence[Message]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


HISTORIES = Path(__file__).parents[1] / "histories"


async def timer_durations(handle: WorkflowHandle[Any, Any]) -> list[timedelta]:
    """Every durable timer the session started, as recorded in its history: how tests see
    backoff and Retry-After without reading a clock."""
    history = await handle.fetch_history()
    return [
        event.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        for event in history.events
        if event.HasField("timer_started_event_attributes")
    ]


async def record_history(handle: WorkflowHandle[Any, Any], name: str) -> None:
    """Keep this run's history for the replay suite: ``DURABLE_AGENT_RECORD_HISTORIES=1``
    writes histories not recorded yet (old ones must keep replaying: they stand for
    sessions older code started); ``=overwrite`` replaces them too."""
    mode = os.environ.get("DURABLE_AGENT_RECORD_HISTORIES")
    path = HISTORIES / f"{name}.json"
    if mode not in ("1", "overwrite") or (mode == "1" and path.exists()):
        return
    history = await handle.fetch_history()
    path.write_text(history.to_json())
