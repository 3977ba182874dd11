"""Sessions waiting on wake-ups: what a sleeping session costs, how late wake-ups fire,
and whether one falling due while its worker is killed, or replaced by a deploy, fires
once.

    ./run bench-long-running [--sessions 1000] [--cache 100] [--window 100] [--kill 20]

A fresh dev server, and workers in processes of their own (resident memory read from
``/proc``), with a small workflow cache so sleeping sessions are evicted as any waiting
session is. Each session gets one reply, then a starter sets it one wake-up, due 30 s
after it is set, the due times spread over ``--window`` seconds (1,000 over 100 s: ten
sessions wake each second, each replayed from its history by a worker that had evicted
it, and calls the model); the scripted model answers at once over
real HTTP. While they sleep: the worker's memory and the server's history per session.
How late each fired is read from the server's history alone (no query wakes a worker):
the workflow time of the task that took the fired timer, which is when the wake-up's
message joined the array, minus the wake-up's due time. Whether each fired once is read
there too (one timer fired, one model call after it), and from the arrays of the
sessions whose worker was killed or replaced. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

from temporalio.client import Client

from bench.idle import percentile, resident_mb
from bench.run import ROOT, dev_server
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.wake_ups import WAKE_UP_SOURCE
from durable_agent._spec.document import AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._wire.messages import AssistantMessage, Message, UserMessage
from durable_agent.temporal._worker import DEV_SERVER_SETTINGS
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest


def reply(request: RecordedRequest) -> AssistantMessage:
    return assistant_text(f"reply {len(request.body['messages'])}")


def worker(address: str, queue: str, cache: int) -> subprocess.Popen[str]:
    data = tempfile.mkdtemp(prefix="bench-wake-ups-")
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.worker_process", "ours", address, queue, data],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "BENCH_MAX_CACHED": str(cache)},
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    return process


def stopped(process: subprocess.Popen[str], how: signal.Signals) -> None:
    process.send_signal(how)
    process.wait(timeout=60)


def woken(messages: list[Message]) -> list[UserMessage]:
    return [m for m in messages if isinstance(m, UserMessage) and m.source == WAKE_UP_SOURCE]


class Sessions:
    def __init__(self, client: Client, queue: str, spec: AgentSpec) -> None:
        self.agents = AgentClient(client, task_queue=queue)
        self.spec = spec
        self._places = asyncio.Semaphore(50)

    async def open(self, count: int) -> list[str]:
        async def one(k: int) -> str:
            async with self._places:
                session = await self.agents.start(self.spec, f"hello {k}")
                await self.agents.session(session).wait(after=0, timeout=300)
                return session

        return list(await asyncio.gather(*(one(k) for k in range(count))))

    async def wake(self, sessions: list[str], delay: timedelta, window: timedelta) -> list[int]:
        """Set each session one wake-up, ``delay`` after it is set and spread over
        ``window``: their due times."""
        step = window / max(1, len(sessions))

        async def one(k: int, session: str) -> int:
            async with self._places:
                made = await self.agents.session(session).wake_up("act", after=delay + k * step)
                return made.due

        return list(await asyncio.gather(*(one(k, s) for k, s in enumerate(sessions))))

    async def arrays(self, sessions: list[str]) -> list[list[Message]]:
        async def one(session: str) -> list[Message]:
            async with self._places:
                return await self.agents.session(session).messages()

        return list(await asyncio.gather(*(one(s) for s in sessions)))

    async def end(self, sessions: list[str]) -> None:
        async def one(session: str) -> None:
            async with self._places:
                await self.agents.session(session).end()

        await asyncio.gather(*(one(s) for s in sessions))


async def history_bytes(client: Client, sessions: list[str]) -> float:
    sizes = []
    for session in sessions:
        history = await client.get_workflow_handle(session).fetch_history()
        sizes.append(sum(event.ByteSize() for event in history.events))
    return statistics.mean(sizes)


async def woke(client: Client, session: str, due: int, timeout: float) -> tuple[float, ...]:
    """From the session's history, once its wake-up was answered: how late it fired (ms:
    the workflow time of the task that took the fired timer, minus ``due``), the part of
    that the server's timer took (the timer's firing, minus ``due``), and whether it
    fired once (1.0: one timer fired, one model call after it)."""
    deadline = time.monotonic() + timeout
    while True:
        events = (await client.get_workflow_handle(session).fetch_history()).events
        fired = [k for k, e in enumerate(events) if e.HasField("timer_fired_event_attributes")]
        if fired:
            after = events[fired[0] :]
            calls = [
                e
                for e in after
                if e.HasField("activity_task_scheduled_event_attributes")
                and e.activity_task_scheduled_event_attributes.activity_type.name == "call_model"
            ]
            answered = any(e.HasField("activity_task_completed_event_attributes") for e in after)
            if calls and answered:
                took = next(
                    e for e in after if e.HasField("workflow_task_started_event_attributes")
                )
                late = took.event_time.ToMilliseconds() - due
                timer = after[0].event_time.ToMilliseconds() - due
                once = len(fired) == 1 and len(calls) == 1
                return float(late), float(timer), float(once)
        if time.monotonic() > deadline:
            return float("nan"), float("nan"), 0.0
        await asyncio.sleep(1)


def fired_once(arrays: list[list[Message]]) -> tuple[int, int]:
    """Sessions whose wake-up fired exactly once and was answered; sessions at all."""
    once = sum(1 for a in arrays if len(woken(a)) == 1 and isinstance(a[-1], AssistantMessage))
    return once, len(arrays)


async def through_a_stop(
    address: str, client: Client, spec: AgentSpec, count: int, deploy: bool
) -> tuple[int, int]:
    """``count`` sessions whose wake-ups fall due while their worker is killed (SIGKILL,
    a new worker started after) or replaced (a new worker first, then the old one
    stopped as a deploy stops it, SIGTERM)."""
    queue = f"bench-wake-stop-{uuid.uuid4().hex[:6]}"
    old = worker(address, queue, 1000)
    sessions = Sessions(client, queue, spec)
    opened = await sessions.open(count)
    dues = await sessions.wake(opened, timedelta(seconds=4), timedelta(seconds=1))
    due = datetime.fromtimestamp(min(dues) / 1000, UTC)
    await asyncio.sleep(max(0.0, (due - datetime.now(UTC)).total_seconds() - 0.5))
    if deploy:
        new = worker(address, queue, 1000)
        stopped(old, signal.SIGTERM)
    else:
        stopped(old, signal.SIGKILL)
        new = worker(address, queue, 1000)
    try:
        await asyncio.gather(*(woke(client, s, d, 120) for s, d in zip(opened, dues, strict=True)))
        arrays = await sessions.arrays(opened)
        await sessions.end(opened)
    finally:
        stopped(new, signal.SIGTERM)
    return fired_once(arrays)


async def main(count: int, cache: int, spread: float, kill: int, embedded: bool) -> None:
    async with dev_server(DEV_SERVER_SETTINGS if embedded else ()) as (address, client):
        queue = f"bench-wake-ups-{uuid.uuid4().hex[:6]}"
        process = worker(address, queue, cache)
        with ScriptedProvider(responder=reply) as provider:
            endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
            spec = AgentSpec.model_validate(
                {
                    "model": ModelSpec(name="wake", endpoint=endpoint, stream=False).model_dump(),
                    "toolsets": [{"kind": "wake_ups", "name": "wake_ups"}],
                }
            )
            try:
                sessions = Sessions(client, queue, spec)
                await sessions.open(1)  # the worker warmed up
                before = resident_mb(process.pid)
                started = time.perf_counter()
                opened = await sessions.open(count)
                open_seconds = time.perf_counter() - started
                window = timedelta(seconds=spread)
                started = time.perf_counter()
                dues = await sessions.wake(opened, timedelta(seconds=30), window)
                set_seconds = time.perf_counter() - started
                await asyncio.sleep(2)  # the worker settles
                waiting = resident_mb(process.pid)
                sample = opened[:: max(1, count // 100)]
                history = await history_bytes(client, sample)
                last = datetime.fromtimestamp(max(dues) / 1000, UTC)
                await asyncio.sleep(max(0.0, (last - datetime.now(UTC)).total_seconds() + 2))
                places = asyncio.Semaphore(20)

                async def read(session: str, due: int) -> tuple[float, ...]:
                    async with places:
                        return await woke(client, session, due, 300)

                found = await asyncio.gather(
                    *(read(s, d) for s, d in zip(opened, dues, strict=True))
                )
                late = [f[0] for f in found if f[0] == f[0]]  # (not NaN: answered)
                timers = [f[1] for f in found if f[1] == f[1]]
                once = (sum(1 for f in found if f[2]), len(found))
                answered_history = await history_bytes(client, sample)
                await sessions.end(opened)
            finally:
                stopped(process, signal.SIGTERM)
            killed = await through_a_stop(address, client, spec, kill, deploy=False)
            deployed = await through_a_stop(address, client, spec, kill, deploy=True)
    _report(
        count, cache, spread, open_seconds, set_seconds, before, waiting, history, answered_history
    )
    print(
        f"how late each fired (ms)           p50 {statistics.median(late):.0f}, "
        f"p95 {percentile(late, 0.95):.0f}, max {max(late):.0f} ({len(late)} wake-ups)"
    )
    print(
        f"  of which the server's timer (ms)  p50 {statistics.median(timers):.0f}, "
        f"p95 {percentile(timers, 0.95):.0f} (the rest: the workflow task's wait for a worker)"
    )
    print(f"fired once and answered           {once[0]} of {once[1]}")
    print(f"due during a worker kill          fired once in {killed[0]} of {killed[1]} sessions")
    print(
        f"due during a deploy               fired once in {deployed[0]} of {deployed[1]} sessions"
    )


def _report(count: int, cache: int, spread: float, *figures: Any) -> None:
    open_seconds, set_seconds, before, waiting, history, answered = figures
    print(f"Wake-ups, {date.today()}, {platform.machine()}, {os.cpu_count()} cores")
    print(f"sessions (one reply each)         {count} in {open_seconds:.1f} s")
    print(f"wake-ups set by a starter         {count} in {set_seconds:.1f} s")
    print(f"due times spread over             {spread:.0f} s ({count / spread:.0f} a second)")
    print(f"workflow cache                    {cache}")
    print(f"worker memory before / waiting    {before:.0f} MB / {waiting:.0f} MB")
    print(f"worker memory per waiting session {(waiting - before) * 1024 / count:.1f} KB")
    print(
        f"server history per session        {history / 1024:.1f} KB while waiting, "
        f"{answered / 1024:.1f} KB once woken and answered"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--cache", type=int, default=100)
    parser.add_argument("--window", type=float, default=100, help="seconds the dues spread over")
    parser.add_argument("--kill", type=int, default=20, help="sessions in each stop scenario")
    parser.add_argument(
        "--embedded-server",
        action="store_true",
        help="the dev server as `durable-agent dev` runs it (DEV_SERVER_SETTINGS)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.cache, args.window, args.kill, args.embedded_server))
