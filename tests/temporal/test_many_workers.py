"""Four ``durable-agent worker`` processes on one task queue, sharing one PostgreSQL
transcript store: sessions spread over all of them complete while workers are killed
with SIGKILL at random (a fresh one started in each one's place), every array the same
as an undisturbed run's. (``./run bench-fleet`` does the
same with 1,000 sessions and prints the throughput with 1, 2 and 4 workers.)"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
from collections import Counter
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.support.agent_harness import default_spec, start_worker_process
from tests.support.arrays import without_times
from tests.support.postgres_server import running_postgres

SESSIONS = 24
KILLS = 3
CITIES = ("NYC", "Tokyo")


def model(request: RecordedRequest) -> AssistantMessage:
    """Two rounds of two parallel calls, then an answer naming what the tools said."""
    if request.body is None:  # a worker killed while sending: nobody reads the answer
        return assistant_text("cut off")
    messages = request.body["messages"]
    rounds = sum(1 for m in messages if m["role"] == "assistant")
    if rounds < 2:
        return assistant_calls(*[("get_time", {"city": city}) for city in CITIES])
    said = [m["content"] for m in messages if m["role"] == "tool"]
    return assistant_text(f"{messages[0]['content']}: {', '.join(said)}")


async def run_all(
    agents: AgentClient, spec: Any, tag: str, on_started: asyncio.Event | None = None
) -> dict[int, str]:
    async def one(k: int) -> tuple[int, str]:
        session = await agents.start(spec, f"session {k}", session_id=f"{tag}-{k}")
        if on_started is not None and k == SESSIONS - 1:
            on_started.set()
        result = await agents.session(session).result()
        assert result.status == "done", (session, result.error)
        return k, json.dumps(without_times(await agents.session(session).messages()))

    return dict(await asyncio.gather(*(one(k) for k in range(SESSIONS))))


@pytest.mark.timeout(600)
async def test_sessions_spread_over_four_workers_survive_random_kills(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    rng = random.Random(20261124)
    with running_postgres() as store, ScriptedProvider(responder=model) as provider:
        spec = default_spec(provider, ["get_time"], session={"end_after_reply": True})
        args = ("--transcript-store", store)

        def start() -> subprocess.Popen[str]:
            return start_worker_process(temporal_env, task_queue, *args)

        workers = [await asyncio.to_thread(start) for _ in range(4)]
        try:
            # reading a session replays it on a worker, which a loaded machine keeps busy
            agents = AgentClient(temporal_env.client, task_queue=task_queue, query_timeout=60)
            calm = await run_all(agents, spec, "calm")
            calm_requests = len(provider.requests)
            started = asyncio.Event()
            wild = asyncio.create_task(run_all(agents, spec, "wild", started))
            await started.wait()
            killed_mid_run = 0
            for _ in range(KILLS):
                # a kill while sessions are in flight: the provider has not seen them all
                await asyncio.sleep(0)
                victim = workers.pop(rng.randrange(len(workers)))
                victim.kill()
                await asyncio.to_thread(victim.wait)
                killed_mid_run += not wild.done()
                workers.append(await asyncio.to_thread(start))
            arrays = await wild
        finally:
            for worker in workers:
                worker.kill()
    assert killed_mid_run >= 1, "the kills landed after the sessions had ended"
    assert arrays == calm  # each session the same as its undisturbed twin
    sent = [r for r in provider.requests[calm_requests:] if r.body is not None]  # not cut off
    answered = Counter(r.body["messages"][0]["content"] for r in sent)
    assert set(answered) == {f"session {k}" for k in range(SESSIONS)}
    assert all(n >= 3 for n in answered.values())  # three model calls each, none skipped


@pytest.mark.timeout(300)
async def test_a_session_is_read_from_another_worker_when_its_own_hangs(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A read goes first to the worker that holds the session; when that worker hangs
    (stopped here with SIGSTOP: a frozen VM, a worker killed while it answered), the
    client asks again in shorter attempts, and once the server stops sending to the
    silent worker, another one answers."""
    with ScriptedProvider([assistant_text("hello")]) as provider:
        spec = default_spec(provider, session={})  # the session stays open, idle
        first = await asyncio.to_thread(start_worker_process, temporal_env, task_queue)
        second: subprocess.Popen[str] | None = None
        try:
            # a read that waited on the frozen worker the whole time would fail
            agents = AgentClient(temporal_env.client, task_queue=task_queue, query_timeout=45)
            session = await agents.start(spec, "hi")
            await agents.session(session).wait(after=0, timeout=60)
            second = await asyncio.to_thread(start_worker_process, temporal_env, task_queue)
            first.send_signal(signal.SIGSTOP)
            messages = await agents.session(session).messages()
            await agents.session(session).end()
        finally:
            for worker in (first, second):
                if worker is not None:
                    worker.kill()
    assert [m.content for m in messages] == ["hi", "hello"]
