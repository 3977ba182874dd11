"""What every example's ``main`` shares: a model from the usual environment variables,
and an embedded Temporal dev server with a worker (the program's own workflows too)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from durable_agent import Agent, ModelSpec, Registry
from durable_agent._providers import model_from_environment
from durable_agent.temporal import DurableAgentPlugin, start_dev_server


def model_or_exit() -> ModelSpec:
    model = model_from_environment()
    if model is None:
        sys.exit("set OPENAI_API_KEY (or OPENAI_BASE_URL for a compatible server) to run this")
    return model


@asynccontextmanager
async def running(
    task_queue: str,
    workflows: Sequence[type] = (),
    agents: Sequence[Agent[Any]] = (),
    registry: Registry | None = None,
) -> AsyncIterator[Client]:
    """An embedded dev server (its data in a fresh folder) and a worker on it, with
    ``registry``'s tools and the ``agents``' tools and MCP servers registered."""
    env = await start_dev_server(Path(mkdtemp()))
    try:
        plugin = DurableAgentPlugin(registry=registry, agents=agents)
        worker = Worker(
            env.client, task_queue=task_queue, workflows=list(workflows), plugins=[plugin]
        )
        async with worker:
            yield worker.client
    finally:
        await env.shutdown()
