"""A worker process for tests/temporal/test_inline_runs.py, killed mid-tool:
`python -m tests.support.inline_worker ADDRESS QUEUE` (the scripted model's URL in
``SCRIPTED_URL``). No workflow cache: every task replays the run from its history."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from durable_agent import Registry
from durable_agent.capabilities import Capabilities, ProviderEndpoint
from durable_agent.temporal import DurableAgentPlugin
from durable_agent.temporal._process import exit_without_teardown
from tests.support import inline_workflows as user


async def serve(address: str, task_queue: str) -> None:
    endpoint = ProviderEndpoint(base_url=os.environ["SCRIPTED_URL"], api_key_env=None)
    plugin = DurableAgentPlugin(
        registry=Registry([user.order_history, user.hold_order]),
        preload_tokenizers=False,
        capabilities=Capabilities(models={"scripted": endpoint}),
    )
    client = await Client.connect(address, plugins=[plugin])
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[user.AutoApprovedCheck],
        max_cached_workflows=0,
        graceful_shutdown_timeout=timedelta(0),
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    asyncio.run(serve(*sys.argv[1:3]))
    exit_without_teardown(0)
