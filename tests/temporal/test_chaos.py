"""Chaos: worker processes killed with SIGKILL at random points of multi-turn sessions
with parallel tool calls and approvals (during model streams, tool batches, approval
waits, right after signals), a fresh worker taking over each time; then the Temporal
dev server itself stopped and restarted on the same SQLite file mid-session. Every
setting is the project's default (heartbeat timeouts notice a lost worker).

Every session must complete with the same array as an undisturbed run, and the tools'
ledger must show every call took effect exactly once. The recovery time of each kill
(to the session's next progress: a provider request or a tool's ledger line) is
printed."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError

from durable_agent import AgentClient
from durable_agent._client.results import NoWorkerError, SessionNotFoundError
from durable_agent._contracts.boundary import AgentResult
from durable_agent._wire.messages import AssistantMessage
from durable_agent.temporal._local import free_port
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest, Reply, chat_stream_events
from tests.support.agent_harness import default_spec
from tests.support.arrays import without_times

ROOT = Path(__file__).parent.parent.parent
#: Random kills per half of the random-kill test (two halves run side by side).
KILLS = 6
SEED = 20261121


def chaos_model(request: RecordedRequest) -> Reply:
    """Streams slowly (kills land mid-stream); decides from the conversation alone."""
    messages = request.body["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    part = messages[last_user]["content"]
    rounds = sum(1 for m in messages[last_user:] if m["role"] == "assistant")
    session = part.split()[0]
    reply: AssistantMessage
    if part.endswith("part 1") and rounds == 0:
        reply = assistant_calls(
            *[("transfer", {"account": f"{session}-{k}", "amount": 10 * k}) for k in range(3)]
        )
    elif part.endswith("part 1") and rounds == 1:
        reply = assistant_calls(
            ("close_account", {"account": f"{session}-0"}),
            ("transfer", {"account": f"{session}-9", "amount": 99}),
        )
    elif part.endswith("part 2") and rounds == 0:
        reply = assistant_calls(
            *[("transfer", {"account": f"{session}-x{k}", "amount": k}) for k in range(2)]
        )
    else:
        reply = assistant_text(f"{part}: done after {rounds} rounds")
    events = chat_stream_events(reply)
    chunks = tuple(f"data: {json.dumps(e)}\n\n".encode() for e in events)
    return Reply(sse=True, chunks=(*chunks, b"data: [DONE]\n\n"), delay=0.03)


class WorkerPool:
    """One worker process at a time; `kill` SIGKILLs it and starts a fresh one."""

    def __init__(
        self,
        address: str,
        task_queue: str,
        ledger: Path,
        store: str,
        *,
        cached: bool = False,
        **env: str,
    ) -> None:
        self.args = [sys.executable, "-m", "tests.support.chaos_worker", address, task_queue, store]
        if cached:
            self.args.append("cached")
        self.env = {**os.environ, "CHAOS_LEDGER": str(ledger), **env}
        self.process: subprocess.Popen[str] | None = None
        self.kills = 0

    def start(self) -> None:
        self.process = subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"

    def kill(self) -> float:
        """SIGKILL the worker, start a fresh one; when the kill happened (monotonic)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        self.process.wait()
        self.kills += 1
        self.start()
        return killed

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


async def _retrying(action: Callable[[], Any], seconds: float = 600) -> Any:
    """Reads and signals may meet a dead worker, a restarting server or a session whose
    start is still on its way: try again, for a bounded time. As long as the sessions
    are given: beside a second copy of the suite a worker took half a minute to start,
    and six kills in a row left none answering for over two minutes."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await action()
        except (NoWorkerError, SessionNotFoundError, RPCError, RuntimeError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def drive(
    agents: AgentClient,
    session: str,
    spec: Any,
    on_signal: Callable[[], None],
) -> AgentResult:
    """A person's side of one session: two messages, approving what is asked."""
    await _retrying(lambda: agents.start(spec, f"{session} part 1", session_id=session))
    cursor, answered, part = 0, set[str](), 1
    while True:
        outcome = await _retrying(
            lambda c=cursor: agents.session(session).wait(after=c, answered=answered, timeout=300)
        )
        cursor += len(outcome.messages)
        if outcome.kind == "approval":
            for pending in outcome.pending:
                await _retrying(
                    lambda p=pending: agents.session(session).approve(p.approval_id, by="chaos")
                )
                answered.add(pending.approval_id)
                on_signal()
        elif outcome.kind == "reply" and part == 1:
            part = 2
            cursor = await _retrying(lambda: agents.session(session).send(f"{session} part 2"))
            on_signal()
        elif outcome.kind == "reply":
            await _retrying(lambda: agents.session(session).end(by="chaos"))
        else:
            result: AgentResult = await agents.session(session).result()
            return result


def ledger_effects(ledger: Path) -> tuple[Counter[str], Counter[str]]:
    starts: Counter[str] = Counter()
    effects: Counter[str] = Counter()
    for line in ledger.read_text().splitlines():
        kind, key = line.split(" ")[:2]
        (starts if kind == "start" else effects)[key] += 1
    return starts, effects


async def run_sessions(
    address: str,
    tag: str,
    count: int,
    tmp: Path,
    *,
    chaos: bool,
    kills: int = KILLS,
    seed: int = SEED,
) -> dict[str, Any]:
    client = await Client.connect(address, data_converter=pydantic_data_converter)
    agents = AgentClient(client, task_queue=f"chaos-{tag}", query_timeout=3)
    ledger = tmp / f"ledger-{tag}.txt"
    store = f"sqlite:///{tmp / f'{tag}.sqlite'}"
    pool = WorkerPool(address, agents.task_queue, ledger, store, cached=not chaos)
    rng = random.Random(seed)
    kill_now = asyncio.Event()
    phases: Counter[str] = Counter()
    recoveries: list[float] = []
    with ScriptedProvider(responder=chaos_model) as provider:
        spec = default_spec(provider, ["transfer", "close_account"])
        await asyncio.to_thread(pool.start)
        sessions = [f"{tag}-s{k}" for k in range(count)]
        drivers = [
            asyncio.create_task(drive(agents, s, spec, kill_now.set if chaos else lambda: None))
            for s in sessions
        ]

        def progress() -> int:
            written = ledger.read_text().count("\n") if ledger.exists() else 0
            return len(provider.requests) + written

        async def chaos_monkey() -> None:
            """Kills at random moments, each once the last one's session moved again."""
            while not all(d.done() for d in drivers) and pool.kills < kills:
                try:
                    await asyncio.wait_for(kill_now.wait(), rng.uniform(0.3, 2.5))
                    kill_now.clear()
                    phases["right after a signal"] += 1
                except TimeoutError:
                    phases[await _phase(agents, sessions)] += 1
                seen = progress()
                killed = await asyncio.to_thread(pool.kill)
                while progress() == seen and not all(d.done() for d in drivers):  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
                recoveries.append(time.monotonic() - killed)

        monkey = asyncio.create_task(chaos_monkey()) if chaos else None
        try:
            results = await asyncio.wait_for(asyncio.gather(*drivers), 600)
            if monkey:
                await monkey
            arrays = {
                s: await _retrying(lambda s=s: agents.session(s).messages()) for s in sessions
            }
        finally:
            pool.stop()
    starts, effects = ledger_effects(ledger)
    return {
        "results": results,
        "arrays": arrays,
        "kills": pool.kills,
        "phases": phases,
        "starts": starts,
        "effects": effects,
        "requests": len(provider.requests),
        "recoveries": recoveries,
    }


async def _phase(agents: AgentClient, sessions: list[str]) -> str:
    try:
        statuses = [await agents.session(s).status() for s in sessions]
    except (NoWorkerError, SessionNotFoundError, RPCError, RuntimeError):
        return "unknown"
    busy = [s.phase for s in statuses if s.phase not in ("done", "idle")]
    return busy[0] if busy else "idle"


def _by_position(counter: Counter[str], tag: str) -> Counter[str]:
    return Counter({key.replace(f"{tag}-", "", 1): n for key, n in counter.items()})


@pytest.mark.timeout(900)
@pytest.mark.parametrize("half", [0, 1])
async def test_sessions_survive_random_worker_kills_at_default_settings(
    tmp_path: Path, half: int
) -> None:
    """Two halves with their own seeds, server and workers, so they run side by side."""
    from durable_agent.temporal import start_dev_server

    env = await start_dev_server(tmp_path / "server", free_port(), free_port())
    address = env.client.service_client.config.target_host
    seed = SEED + half
    try:
        calm = await run_sessions(address, "calm", 3, tmp_path, chaos=False)
        wild: dict[str, Any] = {"kills": 0}
        rounds = 0
        recoveries: list[float] = []
        totals: Counter[str] = Counter()
        effects: Counter[str] = Counter()
        restarts: Counter[str] = Counter()
        while wild["kills"] < KILLS or rounds == 0:  # waves until the kills are done
            left = KILLS - totals["kills"]
            wild = await run_sessions(
                address, f"wild{rounds}", 3, tmp_path, chaos=True, kills=left, seed=seed + rounds
            )
            recoveries += wild["recoveries"]
            for key, value in wild["phases"].items():
                totals[key] += value
            totals["kills"] += wild["kills"]
            for session, array in wild["arrays"].items():
                twin = session.replace(f"wild{rounds}", "calm")
                renamed = json.dumps(without_times(array)).replace(f"wild{rounds}-", "calm-")
                assert renamed == json.dumps(without_times(calm["arrays"][twin])), session
            assert all(r.status == "done" and r.stop_reason == "ended" for r in wild["results"])
            assert _by_position(wild["effects"], f"wild{rounds}") == _by_position(
                calm["effects"], "calm"
            ), "every call took effect exactly once"
            effects.update(wild["effects"])
            restarts.update(wild["starts"])
            rounds += 1
            if totals["kills"] >= KILLS:
                break
    finally:
        await env.shutdown()
    assert totals["kills"] >= KILLS
    assert set(effects.values()) == {1}
    print(
        f"\nchaos: {totals.pop('kills')} kills over {rounds} waves, {3 * rounds} sessions "
        f"completed; kills by phase {dict(totals)}; {len(effects)} tool calls took effect "
        f"once each; {sum(n - 1 for n in restarts.values())} in-flight calls ran again "
        "(same idempotency key, no second effect)\n"
        f"recovery, kill to the session's next progress: "
        f"{', '.join(f'{r:.1f}' for r in recoveries)} s"
    )


@pytest.mark.timeout(600)
async def test_a_session_survives_a_server_restart_on_the_same_sqlite_file(
    tmp_path: Path,
) -> None:
    from durable_agent.temporal import start_dev_server

    data, port, ui_port = tmp_path / "server", free_port(), free_port()
    env = await start_dev_server(data, port, ui_port)
    address = env.client.service_client.config.target_host
    try:
        calm = await run_sessions(address, "calm", 1, tmp_path, chaos=False)
        client = await Client.connect(address, data_converter=pydantic_data_converter)
        agents = AgentClient(client, task_queue="chaos-restart", query_timeout=3)
        pool = WorkerPool(address, agents.task_queue, tmp_path / "ledger-r.txt", "memory:")
        with ScriptedProvider(responder=chaos_model) as provider:
            spec = default_spec(provider, ["transfer", "close_account"])
            await asyncio.to_thread(pool.start)
            try:
                driver = asyncio.create_task(drive(agents, "restart-s0", spec, lambda: None))
                while len(await _retrying(lambda: agents.session("restart-s0").messages())) < 4:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)  # a client polling, as a person would
                phase = (await _retrying(lambda: agents.session("restart-s0").status())).phase
                await env.shutdown()  # the server goes away mid-session...
                env = await start_dev_server(data, port, ui_port)  # ...and comes back
                result = await asyncio.wait_for(driver, 300)
                array = await _retrying(lambda: agents.session("restart-s0").messages())
            finally:
                pool.stop()
    finally:
        await env.shutdown()
    assert result.status == "done" and result.stop_reason == "ended"
    renamed = json.dumps(without_times(array)).replace("restart-", "calm-")
    assert renamed == json.dumps(without_times(calm["arrays"]["calm-s0"]))
    print(f"\nserver restarted on the same SQLite file while the session was {phase}")
