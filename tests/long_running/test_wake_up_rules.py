"""The wake-up rules as pure code, in milliseconds: due times in a zone across daylight
saving time, firings missed while a session was busy, every bound's sentence, and zone
names that are only names."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from durable_agent._contracts.wake_ups import (
    Refusal,
    WakeUp,
    WakeUpRequest,
    epoch,
    fired,
    next_cron,
    planned,
    request_from_tool,
)
from durable_agent._errors import NotAllowed
from durable_agent._spec.tool_kinds import BUILT_IN_KINDS, WorkerSide
from durable_agent._spec.tools import ToolsetSpec
from durable_agent.capabilities import Capabilities

NOW = epoch(datetime(2026, 3, 27, 12, 0, tzinfo=UTC))


def at(*when: int) -> int:
    return epoch(datetime(*when, tzinfo=UTC))


def test_a_cron_rule_keeps_its_local_time_across_daylight_saving_time() -> None:
    saturday = next_cron("0 9 * * *", "Europe/Paris", NOW)  # 9:00 at UTC+1
    sunday = next_cron("0 9 * * *", "Europe/Paris", saturday)  # clocks went forward at 2:00
    monday = next_cron("0 9 * * *", "Europe/Paris", sunday)
    assert [saturday, sunday, monday] == [
        at(2026, 3, 28, 8),
        at(2026, 3, 29, 7),
        at(2026, 3, 30, 7),
    ]


def test_firings_missed_while_busy_fire_once_and_the_interval_keeps_its_phase() -> None:
    step = 60_000
    ticking = WakeUp(id="w1", due=NOW, text="tick", set_by="model", every_seconds=60)
    once = WakeUp(id="w2", due=NOW + 1, text="once", set_by="starter")
    later = WakeUp(id="w3", due=NOW + 10 * step, text="later", set_by="starter")
    kept, due = fired([ticking, once, later], NOW + 3 * step + 30_000)
    assert [w.id for w in due] == ["w1", "w2"]
    assert [(w.id, w.due, w.fired) for w in kept] == [
        ("w3", NOW + 10 * step, 0),
        ("w1", NOW + 4 * step, 1),
    ]
    assert fired(kept, NOW + 3 * step + 30_000) == (kept, []), "nothing fires twice"


@pytest.mark.parametrize(
    ("request_", "sentence"),
    [
        (WakeUpRequest(text="t", every_seconds=5), "the shortest interval is 60 s"),
        (WakeUpRequest(text="t", cron="* * * * *"), "fires 60 s apart"),
        (WakeUpRequest(text="t", at=NOW - 1), "has already passed"),
        (WakeUpRequest(text="t", after_seconds=400 * 86_400), "366 days"),
        (WakeUpRequest(text="t", cron="0 9 * *"), "refused: "),
        (WakeUpRequest(text="t", after_seconds=1, timezone="Mars/Olympus"), "unknown time zone"),
        (WakeUpRequest(text="t", after_seconds=1, timezone="../../etc/passwd"), "unknown"),
    ],
)
def test_every_bound_refuses_with_a_sentence(request_: WakeUpRequest, sentence: str) -> None:
    found = planned(
        request_, "w1", NOW, shortest=61 if request_.cron == "* * * * *" else 60, ahead_days=366
    )
    assert isinstance(found, Refusal) and sentence in found


def test_the_models_arguments_read_a_time_in_its_zone() -> None:
    made = request_from_tool(
        {"text": "call", "at": "2026-07-01T09:00:00", "timezone": "Asia/Tokyo"}
    )
    assert made.at == at(2026, 7, 1, 0)
    with pytest.raises(ValueError, match="exactly one of"):
        request_from_tool({"text": "call", "after_seconds": 5, "cron": "0 9 * * *"})
    with pytest.raises(ValueError, match="not an ISO 8601"):
        request_from_tool({"text": "call", "at": "tomorrow"})


def test_a_call_naming_no_zone_reads_its_time_in_the_zone_the_spec_gives() -> None:
    made = request_from_tool({"text": "call", "at": "2026-07-01T09:00:00"}, "Asia/Tokyo")
    assert made.at == at(2026, 7, 1, 0) and made.timezone == "Asia/Tokyo"
    named = {"text": "call", "at": "2026-07-01T09:00:00", "timezone": "UTC"}
    assert request_from_tool(named, "Asia/Tokyo").at == at(2026, 7, 1, 9)
    assert request_from_tool({"text": "call", "at": "2026-07-01T09:00:00"}).at == at(
        2026, 7, 1, 9
    )


async def test_the_spec_gives_its_toolset_a_zone_the_worker_knows() -> None:
    worker = WorkerSide(capabilities=Capabilities())
    paris = ToolsetSpec(kind="wake_ups", name="wake_ups", timezone="Europe/Paris")
    tools = await BUILT_IN_KINDS["wake_ups"].list_tools(paris, worker)
    assert {t.target.timezone for t in tools} == {"Europe/Paris"}
    setting = next(t for t in tools if t.target.action == "set")
    assert "default Europe/Paris" in json.dumps(setting.definition.parameters)
    plain = ToolsetSpec(kind="wake_ups", name="wake_ups")
    plain_tools = await BUILT_IN_KINDS["wake_ups"].list_tools(plain, worker)
    assert {t.target.timezone for t in plain_tools} == {"UTC"}
    for name in ("Mars/Olympus", "../../etc/passwd"):
        unknown = ToolsetSpec(kind="wake_ups", name="wake_ups", timezone=name)
        with pytest.raises(NotAllowed, match="unknown time zone"):
            await BUILT_IN_KINDS["wake_ups"].list_tools(unknown, worker)
    with pytest.raises(ValidationError, match="only a wake_ups toolset reads times"):
        ToolsetSpec(kind="mcp", name="notes", timezone="Europe/Paris")
