"""Reading what a session's activities were given and gave back, from its history (the
JSON payloads as stored, so a test sees exactly what history keeps)."""

from __future__ import annotations

import json
from typing import Any


def activity_inputs(history: Any, name: str) -> list[dict[str, Any]]:
    """The input of every ``name`` activity scheduled, in order."""
    return [
        json.loads(e.activity_task_scheduled_event_attributes.input.payloads[0].data)
        for e in history.events
        if e.activity_task_scheduled_event_attributes.activity_type.name == name
    ]


def activity_results(history: Any, name: str) -> list[dict[str, Any]]:
    """The result of every ``name`` activity that completed, in order."""
    found = []
    for event in history.events:
        if not event.HasField("activity_task_completed_event_attributes"):
            continue
        completed = event.activity_task_completed_event_attributes
        scheduled = history.events[completed.scheduled_event_id - 1]
        if scheduled.activity_task_scheduled_event_attributes.activity_type.name == name:
            found.append(json.loads(completed.result.payloads[0].data))
    return found
