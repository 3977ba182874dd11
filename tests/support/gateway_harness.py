"""The gateway as users run it: ``durable-agent serve`` in its own process, on a real
port, reached over HTTP (and read as SSE)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider
from tests.conftest import started_on_free_port
from tests.support.agent_harness import running_worker, spec_for

ROOT = Path(__file__).parents[2]


@dataclass
class SSE:
    event: str | None
    id: str | None
    data: Any


@contextmanager
def gateway(
    address: str, task_queue: str, spec_file: Path | None, *more: str, **variables: str
) -> Iterator[str]:
    """``durable-agent serve`` on a free port (``more`` arguments added, ``variables`` set
    in its environment); its base URL. Started again on another port when another
    test's process took the one asked for (``wait_for_port``: the listener must be this
    gateway's)."""
    env = {**os.environ, "TEMPORAL_ADDRESS": address, **variables}
    env.pop("OPENAI_API_KEY", None)
    args = [sys.executable, "-m", "durable_agent._cli.main", "serve", "--task-queue", task_queue]
    args += [*(["--spec", str(spec_file)] if spec_file else []), *more]
    process, port = started_on_free_port(
        lambda port: subprocess.Popen(
            [*args, "--port", str(port)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
        )
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


async def read_sse(response: httpx.Response) -> AsyncIterator[SSE]:
    """Server-sent events as they arrive (comments and pings skipped)."""
    event: str | None = None
    ident: str | None = None
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SSE(event, ident, json.loads("\n".join(data)))
            event, ident, data = None, None, []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("id:"):
            ident = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


@asynccontextmanager
async def served(
    env: WorkflowEnvironment,
    task_queue: str,
    provider: ScriptedProvider,
    tools: list[str],
    registry: Registry,
    folder: Path,
    **session: Any,
) -> AsyncIterator[tuple[Client, str]]:
    """A worker with ``registry``'s tools, and ``durable-agent serve`` running the scripted
    provider's spec (``tools``, ``session``): the worker's client, the gateway's URL."""
    spec = folder / "spec.json"
    spec.write_text(spec_for(provider, tools, session=session).model_dump_json())
    async with running_worker(env, task_queue, registry) as client:
        address = str(env.client.service_client.config.target_host)
        with gateway(address, task_queue, spec) as base:
            yield client, base
