"""Memory across sessions, on the real dev server: what one session of a user
remembers, the next session of the same user recalls and another user's does not; a
write goes through the approval gate like any tool; what a recall returned is in
history, so a replay with an empty store replays it as it ran; a worker that runs the
same write twice writes one row."""

from __future__ import annotations

import dataclasses
import sqlite3
from datetime import timedelta
from pathlib import Path

from durable_agent._activities.tools import ToolActivities
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Replayer

from durable_agent import AgentClient
from durable_agent._contracts.boundary import ToolCallInput
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.capabilities import Memory
from durable_agent.capabilities._memory import MemoryTool
from durable_agent.temporal import DurableAgentPlugin
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import record_history, running_worker, spec_for
from tests.support.histories import activity_results

NOTES = [{"kind": "memory", "name": "notes"}]


def memory(folder: Path) -> Memory:
    return Memory(f"sqlite:///{folder / 'memory.sqlite'}", {"notes": "tenant/{tenant}/user/{user}"})


async def run_session(
    env: WorkflowEnvironment,
    task_queue: str,
    kind: Memory,
    script: list[object],
    owner: str | None,
    **spec: object,
) -> tuple[str, list[ToolMessage]]:
    with ScriptedProvider(script) as provider:  # type: ignore[arg-type]
        async with running_worker(env, task_queue, Registry([kind])) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(
                spec_for(provider, [], toolsets=NOTES, **spec), "hello", owner=owner
            )
            await agents.session(session).result()
            messages = await agents.session(session).messages()
    return session, [m for m in messages if isinstance(m, ToolMessage)]


async def test_a_user_is_remembered_across_sessions_and_other_users_see_nothing(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    kind = memory(tmp_path)
    remember = {"key": "plan", "text": "Alice is on the Pro plan and prefers email"}
    _, [wrote] = await run_session(
        temporal_env,
        task_queue,
        kind,
        [assistant_calls(("notes_remember", remember)), assistant_text("Noted.")],
        "token:alice",
    )
    recall = assistant_calls(("notes_recall", {"query": "which plan"}))
    _, [alice] = await run_session(
        temporal_env, task_queue, kind, [recall, assistant_text("Pro.")], "token:alice"
    )
    second, [bob] = await run_session(
        temporal_env, task_queue, kind, [recall, assistant_text("?")], "token:bob"
    )
    assert wrote.content == "Remembered 'plan'." and not wrote.is_error
    assert "Pro plan" in alice.content
    assert bob.content == '{"memories": []}'  # bob's namespace is his own, and empty
    rows = sqlite3.connect(tmp_path / "memory.sqlite").execute(
        "SELECT namespace, tenant FROM memories"
    )
    assert rows.fetchall() == [("tenant/token:alice/user/token:alice", "token:alice")]
    handle = temporal_env.client.get_workflow_handle(second)
    await record_history(handle, "memory_recall")
    history = await handle.fetch_history()
    # the recall's answer is the activity's result: a replay reads it from history
    [result] = activity_results(history, "run_tool")
    assert result.get("message", result)["content"] == '{"memories": []}'
    plugin = DurableAgentPlugin(preload_tokenizers=False, sandboxed=True)
    replayed = await Replayer(workflows=[], plugins=[plugin]).replay_workflow(
        history, raise_on_replay_failure=False
    )
    assert replayed.replay_failure is None


async def test_a_session_without_an_owner_is_refused_a_per_user_memory(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    kind = memory(tmp_path)
    remember = assistant_calls(("notes_remember", {"key": "k", "text": "t"}))
    _, [refused] = await run_session(
        temporal_env, task_queue, kind, [remember, assistant_text("ok")], None
    )
    assert refused.is_error and "the session has none" in refused.content
    count = sqlite3.connect(tmp_path / "memory.sqlite").execute("SELECT count(*) FROM memories")
    assert count.fetchone() == (0,)


async def test_a_memory_write_waits_for_approval_like_any_tool(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    kind = memory(tmp_path)
    script = [
        assistant_calls(("notes_remember", {"key": "k", "text": "a fact"})),
        assistant_text("done"),
    ]
    rules = {"rules": [{"tools": ["notes_remember"], "action": "ask"}]}
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, Registry([kind])) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = spec_for(provider, [], toolsets=NOTES, approvals=rules)
            session = await agents.start(spec, "hello", owner="token:alice")
            handle = agents.session(session)
            pending = []
            while not pending:
                pending = await handle.pending_approvals()
            count = sqlite3.connect(tmp_path / "memory.sqlite").execute(
                "SELECT count(*) FROM memories"
            )
            assert count.fetchone() == (0,)  # nothing written while it waits
            await handle.deny(pending[0].approval_id, reason="not now")
            await handle.result()
    assert [p.tool_name for p in pending] == ["notes_remember"]
    after = sqlite3.connect(tmp_path / "memory.sqlite").execute("SELECT count(*) FROM memories")
    assert after.fetchone() == (0,)


async def test_a_write_activity_delivered_twice_writes_one_row(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Temporal runs an activity again when the worker running it was lost: the second
    delivery of the same call (its session, turn and slot) writes nothing more."""
    kind = memory(tmp_path)
    with ScriptedProvider([assistant_text("never asked")]) as provider:
        agents = AgentClient(temporal_env.client, task_queue=f"{task_queue}-idle")
        session = await agents.start(spec_for(provider, []), "hi", owner="token:alice")
    call = ToolCallInput(
        turn=1,
        slot=0,
        tool_name="notes_remember",
        tool_call_id="call_0",
        arguments='{"key": "plan", "text": "Pro"}',
        target=MemoryTool(source="notes", tool="remember"),
    )
    run_id = (await temporal_env.client.get_workflow_handle(session).describe()).run_id
    answers = []
    for delivery in (1, 2):
        worker = ActivityEnvironment(client=temporal_env.client)
        worker.info = dataclasses.replace(
            worker.info,
            workflow_id=session,
            workflow_run_id=run_id,
            attempt=delivery,
            start_to_close_timeout=timedelta(seconds=65),
        )
        answers.append(await worker.run(ToolActivities(Registry([kind])).run_tool, call))
    await temporal_env.client.get_workflow_handle(session).terminate("test done")
    db = sqlite3.connect(tmp_path / "memory.sqlite")
    assert [a.content for a in answers] == ["Remembered 'plan'."] * 2
    assert db.execute("SELECT count(*) FROM memories").fetchone() == (1,)
    assert db.execute("SELECT count(*) FROM memory_writes").fetchone() == (1,)
