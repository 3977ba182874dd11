"""The retirement rule for workflow changes, as the code keeps it: this release replays
its own runs and those of the release before, and consumes (never asks) the markers the
previous release's runs recorded; a history older than that is refused by the replay
gate with what to do (``tests/temporal/test_replay.py`` replays every recorded history,
each recorded by the previous release)."""

from __future__ import annotations

import base64
import importlib
import json
import pkgutil
import uuid
from pathlib import Path

import durable_agent._workflows as workflow_package
from durable_agent._workflows.patches import (
    CALLS_IN_PAGES_PATCH,
    PREVIOUS_BASELINE,
    PREVIOUS_RELEASE_ASKED,
    RETIRED_PATCHES,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.boundary import AgentResult
from durable_agent._spec.document import AgentInput
from durable_agent.temporal._replay_gate import check_histories
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import (
    record_history,
    running_worker,
    spec_for,
    start_session,
)
from tests.temporal.test_agent_workflow import registry

HISTORIES = Path(__file__).parent.parent / "histories"


def _named_patches() -> set[str]:
    named = set()
    for module in pkgutil.walk_packages(workflow_package.__path__, "durable_agent._workflows."):
        for name, value in vars(importlib.import_module(module.name)).items():
            if name.endswith("_PATCH") and isinstance(value, str):
                named.add(value)
    return named


def _markers(history: dict[str, object]) -> list[tuple[str, bool]]:
    found = []
    for event in history["events"]:  # type: ignore[attr-defined]
        attributes = event.get("markerRecordedEventAttributes")
        if attributes and attributes.get("markerName") == "core_patch":
            for payload in attributes["details"]["patch-data"]["payloads"]:
                data = json.loads(base64.b64decode(payload["data"]))
                found.append((data["id"], data.get("deprecated", False)))
    return found


def test_what_is_consumed_is_what_the_previous_release_recorded() -> None:
    """Every marker a recorded history holds (the previous release's runs) is one this
    code consumes; none is retired; a retired id is never asked again."""
    recorded = set()
    for path in HISTORIES.glob("*.json"):
        recorded |= {marker for marker, _ in _markers(json.loads(path.read_text()))}
    consumed = PREVIOUS_RELEASE_ASKED | {PREVIOUS_BASELINE}
    assert recorded, "the histories hold markers"
    assert recorded <= consumed, recorded - consumed
    assert not RETIRED_PATCHES & consumed
    assert not RETIRED_PATCHES & _named_patches()
    assert _named_patches() >= PREVIOUS_RELEASE_ASKED


async def test_a_new_run_consumes_the_previous_releases_markers_and_asks_none(
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
    markers = _markers(json.loads(history.to_json()))
    # deprecated: the release after this one may leave them unasked
    assert markers == [(PREVIOUS_BASELINE, True), (CALLS_IN_PAGES_PATCH, True)], markers
    upserts = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    ]
    # each marker comes with the server's upsert of its change version, and nothing else
    # is upserted (the title is in the start's memo)
    assert len(upserts) == 2
    # the new paths: the worker admitted the spec and described its tools on the spot
    # (local activities: a marker each, no task), the memo has a title
    local = [
        e
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]
    assert len(local) == 2
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == ["call_model", "run_tool", "run_tool", "call_model"]
    described = await handle.describe()
    assert await described.memo_value("title") == "weather?"


async def test_a_history_older_than_the_previous_release_is_refused_saying_what_to_do() -> None:
    """A run recorded with a retired marker (here: a recorded history whose baseline is
    put back to an older one) does not replay, and the gate says to move or end those
    sessions first, not to add a patch."""
    recorded = json.loads((HISTORIES / "multi_turn_session.json").read_text())
    for event in recorded["events"]:
        attributes = event.get("markerRecordedEventAttributes")
        if attributes and attributes.get("markerName") == "core_patch":
            payload = attributes["details"]["patch-data"]["payloads"][0]
            older = {"id": "baseline-2026-11-27", "deprecated": False}
            payload["data"] = base64.b64encode(json.dumps(older).encode()).decode()
    history = WorkflowHistory.from_json("old", json.dumps(recorded))
    [as_recorded] = await check_histories(
        [
            (
                "recorded",
                WorkflowHistory.from_json(
                    "now", (HISTORIES / "multi_turn_session.json").read_text()
                ),
            )
        ]
    )
    [verdict] = await check_histories([("old", history)])
    assert as_recorded.failure is None
    assert verdict.failure is not None
    assert "older than the previous release" in verdict.explanation
    assert "versions move" in verdict.explanation and "patched" not in verdict.explanation


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
