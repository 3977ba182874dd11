"""The heartbeat's timer, in temporalio's activity test environment: the first beat is
due half a timeout after the start the server recorded, not after this code began, so
an activity that reached its code late (started eagerly on a busy worker) beats at
once. Told by the order of events on the loop, not by a clock."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

from durable_agent._activities.running import first_beat_after, heartbeating
from temporalio.testing import ActivityEnvironment


async def _beats_in_a_few_loop_turns(started: datetime) -> list[Any]:
    beats: list[Any] = []
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, heartbeat_timeout=timedelta(seconds=2), started_time=started
    )
    env.on_heartbeat = lambda *details: beats.append(details)

    async def work() -> None:
        async with heartbeating():
            for _ in range(10):  # the loop turns a timer due now fires and its task runs in
                await asyncio.sleep(0)

    await env.run(work)
    return beats


async def test_an_activity_that_reached_its_code_late_beats_at_once() -> None:
    late = datetime.now(UTC) - timedelta(seconds=1.5)  # most of the 2 s timeout gone
    assert len(await _beats_in_a_few_loop_turns(late)) == 1


async def test_an_activity_that_just_started_sends_no_beat_before_half_a_timeout() -> None:
    assert await _beats_in_a_few_loop_turns(datetime.now(UTC) + timedelta(seconds=5)) == []


def test_the_first_beat_is_never_later_than_half_a_timeout_from_now() -> None:
    """A pure rule of the recorded start and a given now: no clock is read."""
    started = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
    now = started.timestamp()
    assert first_beat_after(started, 2.0, now - 3600) == 1.0  # a clock behind
    assert first_beat_after(started, 2.0, now + 3600) == 0.0
    assert first_beat_after(started, 2.0, now + 0.5) == 0.5
    assert first_beat_after(started, 2.0, now) == 1.0
