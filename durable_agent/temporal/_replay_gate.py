"""The replay gate: before a deploy, replay histories (of running sessions, a sample of
them, or recorded ones) against the code in the working tree, and say where one
diverges and what to do about it.

A divergence means today's code issues another command than the one the history
recorded at that point: a session running now would fail on the new workers. The
fix is to guard the change with ``workflow.patched("<new id>")`` and keep the old
path for runs without its marker; a history older than the previous release is not
replayed at all, and its sessions move or end first
(docs/how-to/changing-workflow-code.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.worker import Replayer

from durable_agent._contracts.boundary import WORKFLOW_NAME
from durable_agent._contracts.evals import EVAL_WORKFLOW
from durable_agent._spec.endpoints import LIMITER_WORKFLOW

from ._plugin import DurableAgentPlugin

_TYPES = (WORKFLOW_NAME, LIMITER_WORKFLOW, EVAL_WORKFLOW)
_MISMATCH = re.compile(
    r"(\w[\w ]*?) of scheduled event '([^']*)' does not match \1 of (\w[\w ]*?) '([^']*)'",
    re.IGNORECASE,
)
_MESSAGE = re.compile(r'message: "([^"]*)"')


@dataclass(frozen=True)
class ReplayVerdict:
    source: str
    workflow_id: str
    failure: str | None
    """``None``: it replays."""
    explanation: str = ""


def patch_markers(history: WorkflowHistory) -> list[str]:
    """The patch ids the run recorded (``workflow.patched`` markers), in order."""
    found = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_MARKER_RECORDED:
            continue
        attributes = event.marker_recorded_event_attributes
        if attributes.marker_name != "core_patch":
            continue
        for payload in attributes.details["patch-data"].payloads:
            found.append(str(json.loads(payload.data).get("id", "")))
    return found


def known_patches() -> set[str]:
    """The patch ids today's workflow code asks or consumes (``workflows/patches.py``)."""
    from durable_agent._workflows import patches

    asked = {value for name, value in vars(patches).items() if name.endswith("_PATCH")}
    return asked | {patches.PREVIOUS_BASELINE}


def retired_patches() -> frozenset[str]:
    """Patch ids of releases older than the previous one: their paths are gone."""
    from durable_agent._workflows import patches

    return patches.RETIRED_PATCHES


def explain(failure: str, history: WorkflowHistory) -> str:
    """What a nondeterminism failure means for the person about to deploy."""
    markers = patch_markers(history)
    older = [marker for marker in markers if marker in retired_patches()]
    if older:  # a run from before the previous release: nothing in today's code fits it
        return (
            f"the history was recorded by code older than the previous release (it carries "
            f"retired patch markers {older}). This release replays only its own runs and "
            "the previous release's: move these sessions to the previous release's build "
            "first (durable-agent versions move --from BUILD), or let them end "
            "(docs/how-to/changing-workflow-code.md)."
        )
    newer = [marker for marker in markers if marker not in known_patches()]
    if newer:  # a rollback: a patch in today's code cannot help
        return (
            f"the history was recorded by newer code than today's: it carries patch markers "
            f"today's code does not know ({newer}). No patch fixes that: deploy the newer "
            "code again, or let these sessions end (or move to a newer build) before rolling "
            "back (docs/how-to/changing-workflow-code.md)."
        )
    carried = f"the run carries patch markers {markers}" if markers else "it has no patch markers"
    found = _MISMATCH.search(failure)
    if found is not None:
        what, recorded, _, now = found.groups()
        change = (
            f"today's code issues a command whose {what.lower()} is {now!r} where the "
            f"history recorded {recorded!r}"
        )
    else:
        change = "today's code issues other commands than the history recorded"
    return (
        f'{change}; {carried}. Guard the change with workflow.patched("<a new id>") and '
        "keep the old path for runs without its marker (docs/how-to/changing-workflow-code.md)."
    )


async def check_histories(histories: Sequence[tuple[str, WorkflowHistory]]) -> list[ReplayVerdict]:
    # in the sandbox: a change that reads the clock or a file fails the gate too
    plugin = DurableAgentPlugin(preload_tokenizers=False, sandboxed=True)
    # the SDK core logs every divergence as a warning: the verdicts say it once, better
    quiet = Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
        )
    )
    replayer = Replayer(workflows=[], plugins=[plugin], runtime=quiet)
    verdicts = []
    for source, history in histories:
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        failure = str(result.replay_failure) if result.replay_failure is not None else None
        if failure is not None and (said := _MESSAGE.search(failure)) is not None:
            failure = said.group(1)  # the server's words, without the envelope
        explanation = explain(failure, history) if failure else ""
        verdicts.append(ReplayVerdict(source, history.workflow_id, failure, explanation))
    return verdicts


def recorded_histories(paths: Sequence[Path]) -> list[tuple[str, WorkflowHistory]]:
    """Histories in JSON (``temporal workflow show --output json``, or
    ``WorkflowHistory.to_json``): files, or folders of them."""
    found = []
    for path in paths:
        files = sorted(path.glob("*.json")) if path.is_dir() else [path]
        for file in files:
            text = file.read_text()
            found.append((str(file), WorkflowHistory.from_json(file.stem, _events_only(text))))
    return found


async def running_histories(
    client: Client, task_queue: str, sample: int | None = None
) -> AsyncIterator[tuple[str, WorkflowHistory]]:
    """The histories of the sessions, limiters and evaluations running on
    ``task_queue`` (the newest ``sample`` of them)."""
    kinds = " OR ".join(f'WorkflowType = "{t}"' for t in _TYPES)
    query = f"ExecutionStatus = 'Running' AND TaskQueue = {json.dumps(task_queue)} AND ({kinds})"
    async for execution in client.list_workflows(query, limit=sample):
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        yield f"running {execution.id}", await handle.fetch_history()


def _events_only(text: str) -> Any:
    """A history's JSON, whether the server's (``events``) or one event list."""
    data = json.loads(text)
    return data if isinstance(data, dict) else {"events": data}
