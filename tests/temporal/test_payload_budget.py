"""The payload budget: big tool results are cut with a marker, and transcripts that
outgrow one payload travel to the store in pieces and across continue-as-new by
reference, so no activity input or continue-as-new ever goes over the budget."""

from __future__ import annotations

import json
import re
from typing import Any

from durable_agent._activities.transcript_store import (
    SqliteBackend,
    TranscriptStore,
    transcript_scope,
)
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import Message
from durable_agent.temporal import build_worker
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import (
    LOCAL_DEVELOPMENT,
    record_history,
    spec_for,
    tool_messages,
)
from tests.support.arrays import without_times

registry = Registry()
BUDGET = 10_000


@tool(registry=registry)
def dump(name: str, size: int) -> str:
    """Return a large document."""
    return (name + " ") * (size // (len(name) + 1))


@tool(registry=registry, approval="always")
def confirm(what: str) -> str:
    """Ask a person to confirm."""
    return f"confirmed {what}"


def dumps(*names: str) -> Any:
    return assistant_calls(*[("dump", {"name": name, "size": 4000}) for name in names])


SCRIPT = [
    dumps("alpha", "beta"),
    dumps("gamma", "delta"),
    assistant_calls(("confirm", {"what": "report"})),
    dumps("epsilon"),
    assistant_text("all documents read"),
]


def payload_sizes(history: Any) -> list[tuple[str, int]]:
    """(what, bytes) of every activity input and continue-as-new input in a history."""
    sizes = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            a = event.activity_task_scheduled_event_attributes
            sizes.append((a.activity_type.name, a.input.ByteSize()))
        if event.HasField("workflow_execution_continued_as_new_event_attributes"):
            a = event.workflow_execution_continued_as_new_event_attributes
            sizes.append(("continue_as_new", a.input.ByteSize()))
    return sizes


async def _run(
    env: WorkflowEnvironment, task_queue: str, store: TranscriptStore, wipe: bool, **session: Any
) -> tuple[list[Any], AgentClient, str, int]:
    with ScriptedProvider(SCRIPT) as provider:
        async with build_worker(
            env.client,
            capabilities=LOCAL_DEVELOPMENT,
            task_queue=task_queue,
            registry=registry,
            transcripts=store,
        ):
            agents = AgentClient(env.client, task_queue=task_queue)
            spec = spec_for(
                provider,
                ["dump", "confirm"],
                session={"end_after_reply": True, "payload_budget_bytes": BUDGET, **session},
            )
            sid = await agents.start(spec, "read the documents")
            waiting = await agents.session(sid).wait(timeout=30)
            assert waiting.kind == "approval"
            if wipe and store.backend is not None:
                await store.backend.wipe()
                store.forget()
            await agents.session(sid).approve(waiting.pending[0].approval_id)
            result = await agents.session(sid).result()
            assert result.status == "done", result
            messages = await agents.session(sid).messages()
            runs = (await agents.session(sid).status()).runs
    return messages, agents, sid, runs


async def test_a_lost_store_is_refilled_in_pieces_within_the_budget(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Any
) -> None:
    plain, *_ = await _run(temporal_env, task_queue, TranscriptStore(), wipe=False)
    store = TranscriptStore(SqliteBackend(tmp_path / "t.sqlite"))
    messages, agents, sid, _ = await _run(temporal_env, f"{task_queue}-w", store, wipe=True)
    assert without_times(messages) == without_times(plain)
    sizes = payload_sizes(await agents.temporal.get_workflow_handle(sid).fetch_history())
    pieces = [size for name, size in sizes if name == "store_transcript"]
    assert len(pieces) >= 2, "the array no longer fits one payload: it goes in pieces"
    assert all(size <= BUDGET for _, size in sizes), sizes


async def test_continue_as_new_carries_a_big_array_by_reference(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Any
) -> None:
    plain, *_ = await _run(temporal_env, task_queue, TranscriptStore(), wipe=False)
    store = TranscriptStore(SqliteBackend(tmp_path / "t.sqlite"))
    messages, agents, sid, runs = await _run(
        temporal_env, f"{task_queue}-c", store, wipe=False, continue_as_new_after_events=30
    )
    assert without_times(messages) == without_times(plain)
    assert runs >= 2
    latest = await agents.temporal.get_workflow_handle(sid).fetch_history()
    started = latest.events[0].workflow_execution_started_event_attributes
    carried = json.loads(started.input.payloads[0].data)["carried"]
    assert carried["messages"] == [] and carried["transcript"]["count"] > 0
    assert any(name == "load_transcript" for name, _ in payload_sizes(latest))
    first_run = agents.temporal.get_workflow_handle(sid, run_id=started.first_execution_run_id)
    first_sizes = payload_sizes(await first_run.fetch_history())
    assert all(size <= BUDGET for _, size in first_sizes), first_sizes


async def test_long_tool_results_are_cut_with_a_marker_and_kept_whole_in_the_store(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    store = TranscriptStore()
    script = [assistant_calls(("dump", {"name": "zeta", "size": 5000})), assistant_text("ok")]
    with ScriptedProvider(script) as provider:
        async with build_worker(
            temporal_env.client,
            capabilities=LOCAL_DEVELOPMENT,
            task_queue=task_queue,
            registry=registry,
            transcripts=store,
        ):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            spec = spec_for(provider, [{"name": "dump", "max_result_chars": 1000}])
            sid = await agents.start(spec, "dump it")
            await agents.session(sid).result()
            (result,) = tool_messages(await agents.session(sid).messages())
    assert result.content.startswith("zeta zeta")
    marker = re.search(
        r"\[truncated by durable-agent: showing the first 1000 of (\d+) characters; "
        r"the whole result is stored as (\w+)\]$",
        result.content,
    )
    assert marker, result.content[-200:]
    assert len(result.content) < 1200
    assert await store.load_message(marker.group(2)) is None, "kept in its session's scope"
    scope = transcript_scope.set(f"default/{sid}")  # as the session's own activities read
    try:
        whole = await store.load_message(marker.group(2))
    finally:
        transcript_scope.reset(scope)
    assert whole is not None and len(whole.content) == int(marker.group(1)) >= 4995
    # the model saw the cut result, not the whole
    assert provider.requests[1].body["messages"][-1]["content"] == result.content


class LosesEverythingOnce(TranscriptStore):
    """A store wiped, backend and cache, just as a continued run first reads its array
    back (a ``memory:`` worker restarted between the runs; a store pruned or wiped)."""

    wiped = False

    async def load(self, head: str) -> tuple[Message, ...] | None:
        if not self.wiped and activity.info().activity_type == "load_transcript":
            self.wiped = True
            assert self.backend is not None
            await self.backend.wipe()
            self.forget()
        return await super().load(head)


async def test_a_carried_array_the_store_lost_is_read_back_from_the_previous_run(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Any
) -> None:
    plain, *_ = await _run(temporal_env, task_queue, TranscriptStore(), wipe=False)
    store = LosesEverythingOnce(SqliteBackend(tmp_path / "t.sqlite"))
    messages, _, sid, runs = await _run(
        temporal_env, f"{task_queue}-l", store, wipe=False, continue_as_new_after_events=30
    )
    assert store.wiped and runs >= 2
    assert without_times(messages) == without_times(plain)
    read_back, failed_loads = [], 0
    async for run in temporal_env.client.list_workflows(f"WorkflowId = '{sid}'"):
        handle = temporal_env.client.get_workflow_handle(sid, run_id=run.run_id)
        for event in (await handle.fetch_history()).events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                scheduled = event.activity_task_scheduled_event_attributes
                if scheduled.activity_type.name == "closed_conversation":
                    read_back.append(run.run_id)
                    await record_history(handle, "carried_read_back")
            if event.HasField("activity_task_failed_event_attributes"):
                failure = event.activity_task_failed_event_attributes.failure
                failed_loads += "no transcript" in failure.message
    assert len(read_back) == 1, "the run that found its array gone read it back, once"
    assert failed_loads == 1
