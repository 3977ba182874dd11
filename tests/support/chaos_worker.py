"""A worker process for the chaos tests:
`python -m tests.support.chaos_worker ADDRESS QUEUE STORE [cached]`.
No workflow cache unless ``cached``: every task replays the whole history, the
strongest check that a task after a kill replays on a fresh process. (Undisturbed
reference runs are cached: nothing is killed there.)"""

from __future__ import annotations

import asyncio
import sys

from durable_agent._activities.transcript_store import open_transcript_store
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from durable_agent._observability.logs import configure_logging
from durable_agent._tools.registry import Registry
from durable_agent.capabilities import Capabilities
from durable_agent.temporal import build_worker
from durable_agent.temporal._process import exit_without_teardown


async def serve(address: str, task_queue: str, store: str, cached: bool) -> None:
    configure_logging("warning")
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    worker = build_worker(
        client,
        task_queue=task_queue,
        registry=Registry.from_modules(["tests.support.chaos_tools"]),
        transcripts=open_transcript_store(store),
        max_cached_workflows=1000 if cached else 0,
        preload_tokenizers=False,  # no chaos session counts with a tokenizer
        capabilities=Capabilities.development(),  # the specs carry a loopback endpoint
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    asyncio.run(serve(*sys.argv[1:4], cached=sys.argv[4:5] == ["cached"]))
    exit_without_teardown(0)
