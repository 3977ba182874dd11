"""The PostgreSQL transcript store restarts under running sessions: a five-second
restart, and an outage longer than a store call's own retries. Either way the session
waits and completes with the undisturbed transcript; it never fails, and the model
is not asked again because of the store."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from durable_agent._activities.transcript_store import PostgresBackend, TranscriptStore
from temporalio.testing import WorkflowEnvironment

from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.temporal import build_worker
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import (
    LOCAL_DEVELOPMENT,
    query_messages,
    spec_for,
    start_session,
    wait_for,
)
from tests.support.postgres_server import PostgresServer, running_postgres_server

registry = Registry()
gate = {"running": 0, "release": asyncio.Event()}


@tool(registry=registry)
async def hold(label: str) -> str:
    """Waits until the test lets it finish."""
    gate["running"] += 1  # type: ignore[operator]
    await gate["release"].wait()  # type: ignore[union-attr]
    return f"{label} held"


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres_server() as server:
        yield server


async def _session_through_an_outage(
    env: WorkflowEnvironment,
    task_queue: str,
    server: PostgresServer,
    *,
    down_seconds: float,
    store_retry_seconds: float,
) -> tuple[list[object], int, str]:
    gate["running"], gate["release"] = 0, asyncio.Event()
    backend = PostgresBackend(server.url, retry_seconds=store_retry_seconds)
    script = [
        assistant_calls(("hold", {"label": "first"})),
        assistant_calls(("hold", {"label": "second"})),
        assistant_text("both held"),
    ]
    try:
        with ScriptedProvider(script) as provider:
            spec = spec_for(provider, ["hold"])
            transcripts = TranscriptStore(backend)
            async with build_worker(
                env.client,
                capabilities=LOCAL_DEVELOPMENT,
                task_queue=task_queue,
                registry=registry,
                transcripts=transcripts,
            ):
                handle = await start_session(env.client, task_queue, spec, "hold twice")
                await wait_for(lambda: _true(gate["running"] == 1), timeout=30)
                await asyncio.to_thread(server.stop)  # the database goes away mid-session
                gate["release"].set()  # type: ignore[union-attr]
                await asyncio.sleep(down_seconds)
                await asyncio.to_thread(server.start)  # ...and comes back, same data
                result = await asyncio.wait_for(handle.result(), 120)
                array = await query_messages(handle)
    finally:
        await backend.close()
    return array, len(provider.requests), f"{result.status}/{result.stop_reason}"


async def _true(value: bool) -> bool:
    return value


@pytest.mark.parametrize(
    ("down", "retry"),
    [(5.0, 30.0), (8.0, 1.0)],
    ids=["restarted in 5 s", "down longer than a store call retries"],
)
async def test_sessions_wait_for_the_store_and_complete(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    postgres: PostgresServer,
    down: float,
    retry: float,
) -> None:
    array, requests, outcome = await _session_through_an_outage(
        temporal_env, task_queue, postgres, down_seconds=down, store_retry_seconds=retry
    )
    assert outcome == "done/final_answer"
    assert [m.content for m in array if isinstance(m, ToolMessage)] == [
        "first held",
        "second held",
    ]
    assert array[-1].content == "both held"
    assert requests == 3, "the store's outage cost no model call"
