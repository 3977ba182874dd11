"""A new run records one patch marker, the baseline, and takes every patch's new path.

Older histories, without a baseline or with the first one, replay as they did
(``tests/temporal/test_replay.py`` replays all of them: ``baselined`` was recorded with the
first baseline, ``start_checks_local`` with the second, ``pages_of_500`` with the third,
``second_chain`` with the fourth, ``stored_prefix_kept`` with the fifth,
``model_reply_digested`` with the sixth, ``tool_calls_in_pages`` with today's)."""

from __future__ import annotations

import importlib
import pkgutil
import uuid

import durable_agent._workflows as workflow_package
from durable_agent._workflows.patches import (
    BASELINE_PATCH,
    BASELINED,
    EIGHTH_BASELINE_PATCH,
    EIGHTH_BASELINED,
    FIFTH_BASELINE_PATCH,
    FIFTH_BASELINED,
    FIRST_BASELINE_PATCH,
    FIRST_BASELINED,
    FOURTH_BASELINE_PATCH,
    FOURTH_BASELINED,
    SECOND_BASELINE_PATCH,
    SECOND_BASELINED,
    SEVENTH_BASELINE_PATCH,
    SEVENTH_BASELINED,
    SIXTH_BASELINE_PATCH,
    SIXTH_BASELINED,
    THIRD_BASELINE_PATCH,
    THIRD_BASELINED,
)
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts._contracts import AgentResult
from durable_agent._spec._spec import AgentInput
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import (
    record_history,
    running_worker,
    spec_for,
    start_session,
)
from tests.temporal.test_agent_workflow import registry


def _named_patches() -> set[str]:
    named = set()
    for module in pkgutil.walk_packages(workflow_package.__path__, "durable_agent._workflows."):
        for name, value in vars(importlib.import_module(module.name)).items():
            if name.endswith("_PATCH") and isinstance(value, str):
                named.add(value)
    return named


def test_the_baseline_stands_for_patches_the_code_names() -> None:
    named = _named_patches()
    assert named >= BASELINED, BASELINED - named  # a typo would never be asked
    baselines = {
        BASELINE_PATCH,
        EIGHTH_BASELINE_PATCH,
        SEVENTH_BASELINE_PATCH,
        SIXTH_BASELINE_PATCH,
        FIFTH_BASELINE_PATCH,
        FOURTH_BASELINE_PATCH,
        THIRD_BASELINE_PATCH,
        SECOND_BASELINE_PATCH,
        FIRST_BASELINE_PATCH,
    }
    assert baselines <= named and len(baselines) == 9
    assert not baselines & BASELINED
    assert FIRST_BASELINED < SECOND_BASELINED < THIRD_BASELINED < FOURTH_BASELINED
    assert FOURTH_BASELINED < FIFTH_BASELINED < SIXTH_BASELINED < SEVENTH_BASELINED
    assert SEVENTH_BASELINED < EIGHTH_BASELINED < BASELINED
    assert len(FIRST_BASELINED) == 14


async def test_a_new_run_records_one_marker_and_takes_the_new_paths(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})),
        assistant_text("both known"),
    ]
    with ScriptedProvider(script) as provider:  # type: ignore[arg-type]
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider, ["get_weather"])
            handle = await start_session(client, task_queue, spec, "weather?")
            result = await handle.result()
        await record_history(handle, "start_checks_local")
    assert result.status == "done" and result.final and result.final.content == "both known"

    history = await handle.fetch_history()
    markers = [
        e.marker_recorded_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    patches = [m.details["patch-data"] for m in markers if m.marker_name == "core_patch"]
    assert len(patches) == 1 and BASELINE_PATCH.encode() in patches[0].SerializeToString()
    upserts = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    assert len(upserts) == 1
    # the patched paths were taken: the worker admitted the spec and described its tools
    # on the spot (local activities: a marker each, no task), the memo has a title
    local = [m for m in markers if m.marker_name == "core_local_activity"]
    assert len(local) == 2
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == ["call_model", "run_tool", "run_tool", "call_model"]
    described = await handle.describe()
    assert await described.memo_value("title") == "weather?"


async def test_a_title_the_start_holds_is_not_upserted_again(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """``AgentClient.start`` puts the session's title in the start's memo, and the run
    upserts no memo of its own (an event and a visibility write fewer). A start by
    other means with a wrong title, or one that is not text, is titled over."""
    script = [assistant_text("sunny"), assistant_text("rain"), assistant_text("snow")]
    with ScriptedProvider(script) as provider:  # type: ignore[arg-type]
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider)
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "  weather\n in Oslo?")
            by_client = client.get_workflow_handle(sid, result_type=AgentResult)
            others = []
            for wrong in ("a wrong title", 42):
                others.append(
                    await client.start_workflow(
                        "AgentWorkflow",
                        AgentInput(spec=spec, message="real words"),
                        id=f"session-{uuid.uuid4().hex[:12]}",
                        task_queue=task_queue,
                        memo={"title": wrong},
                        result_type=AgentResult,
                    )
                )
            handles = [by_client, *others]
            results = [await handle.result() for handle in handles]
        await record_history(by_client, "titled_at_start")
    assert [r.status for r in results] == ["done"] * 3
    titles, upserts = [], []
    for handle in handles:
        titles.append(await (await handle.describe()).memo_value("title"))
        history = await handle.fetch_history()
        modified = EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED
        upserts.append(sum(e.event_type == modified for e in history.events))
    assert titles == ["weather in Oslo?", "real words", "real words"], titles
    assert upserts == [0, 1, 1], upserts
