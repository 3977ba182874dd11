"""A benchmark worker in its own process, so its CPU time can be measured alone.

python -m bench.worker_process ours|floor ADDRESS TASK_QUEUE DATA_DIR

With ``BENCH_PROFILE`` set (a path prefix), every thread of it is profiled, and each
``mark LABEL`` line on its stdin writes what ran since the last one to
``<prefix>.LABEL.prof`` and answers ``marked`` (bench/profile.py; ``BENCH_PROFILE_CLOCK=cpu``:
each thread's CPU time, not wall time).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from durable_agent._activities.transcript_store import default_store_url, open_transcript_store
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from bench.floor import FloorActivities, FloorWorkflow
from bench.profile import ThreadProfiles
from bench.workloads import registry
from durable_agent._observability.logs import configure_logging
from durable_agent.capabilities import Capabilities
from durable_agent.temporal import build_worker
from durable_agent.temporal._process import exit_without_teardown, freeze_startup_heap


async def answer_marks(profiles: ThreadProfiles) -> None:
    """Write a section of the profile for each ``mark LABEL`` line on stdin."""
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        command, _, label = line.decode().strip().partition(" ")
        if command == "mark" and label:
            profiles.mark(label)
            print("marked", flush=True)


async def serve(
    kind: str, address: str, task_queue: str, data_dir: Path, profiles: ThreadProfiles | None
) -> None:
    configure_logging("warning", once=True)  # as ``durable-agent worker`` does
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    if kind == "ours":
        # BENCH_STORE_URL: a store the workers share (PostgreSQL), else one of their own
        store = open_transcript_store(
            os.environ.get("BENCH_STORE_URL") or default_store_url(data_dir)
        )
        worker = build_worker(
            client,
            task_queue=task_queue,
            registry=registry,
            transcripts=store,
            capabilities=Capabilities.development(),  # the specs carry a loopback endpoint
            max_cached_workflows=int(os.environ.get("BENCH_MAX_CACHED", "1000")),
        )
    else:
        floor = FloorActivities(registry)
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[FloorWorkflow],
            activities=[floor.call_model, floor.run_tool],
            max_concurrent_activities=100,
        )
    freeze_startup_heap()  # as ``durable-agent worker`` does; the floor's too, to be fair
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with worker:
        print("ready", flush=True)
        marks = asyncio.create_task(answer_marks(profiles)) if profiles else None
        await stop.wait()
        if marks:
            marks.cancel()


if __name__ == "__main__":
    profile = os.environ.get("BENCH_PROFILE")
    cpu_clock = os.environ.get("BENCH_PROFILE_CLOCK") == "cpu"
    profiles = ThreadProfiles(profile, cpu_clock) if profile else None
    asyncio.run(serve(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), profiles))
    exit_without_teardown(0)
