"""Scheduled agents: an agent started on a Temporal Schedule (cron or interval), each
run a one-shot session of its own id, listed per schedule. Mixed into
``AgentClient``.

Temporal keeps the schedule (its overlap policy, pauses, backfills and what it
skipped); nothing here polls. A run's id is the schedule's action id with the
server's timestamp appended, and its memo says which schedule started it.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._contracts.boundary import WORKFLOW_NAME
from durable_agent._payloads.storage import check_fits
from durable_agent._spec.document import AgentInput, AgentSpec
from durable_agent._wire.messages import UserMessage

from .results import Connection, SessionSummary, list_sessions, parse_spec

Overlap = Literal[
    "skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all"
]
OVERLAPS: dict[str, ScheduleOverlapPolicy] = {
    "skip": ScheduleOverlapPolicy.SKIP,
    "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
    "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL,
    "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
    "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER,
    "allow_all": ScheduleOverlapPolicy.ALLOW_ALL,
}


@dataclass(frozen=True)
class ScheduleSummary:
    name: str
    paused: bool
    note: str
    next_runs: list[datetime]
    recent_runs: list[str]
    """The ids of the latest sessions it started, newest last."""


class Schedules:
    """``AgentClient.schedules.list``: sessions started on a schedule."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.temporal: Client = connection.temporal

    async def create(
        self,
        name: str,
        spec: AgentSpec | dict[str, Any] | str,
        message: str | UserMessage,
        *,
        cron: Sequence[str] = (),
        every: timedelta | None = None,
        overlap: Overlap = "skip",
        paused: bool = False,
        owner: str | None = None,
    ) -> str:
        """Start ``spec`` on ``message`` on a schedule (``cron`` expressions and/or
        ``every``): each run a one-shot session. ``overlap``: what a run due while the
        last one still runs does (Temporal's overlap policies; ``skip`` by default)."""
        _check_name(name)
        if not cron and every is None:
            raise ValueError("a schedule needs cron expressions or an interval (every)")
        parsed = parse_spec(spec)
        one_shot = parsed.session.model_copy(update={"end_after_reply": True})
        request = AgentInput(spec=parsed.model_copy(update={"session": one_shot}), message=message)
        check_fits(self.temporal.data_converter, request, "the schedule's start")
        memo = {"schedule": name, **({"owner": owner} if owner else {})}
        queue = self._connection.task_queue
        await self.temporal.create_schedule(
            name,
            Schedule(
                action=ScheduleActionStartWorkflow(
                    WORKFLOW_NAME,
                    request,
                    id=f"{name}-run",
                    task_queue=queue,
                    memo=memo,
                    static_summary=f"scheduled by {name}",
                ),
                spec=ScheduleSpec(
                    cron_expressions=list(cron),
                    intervals=[ScheduleIntervalSpec(every=every)] if every else [],
                ),
                policy=SchedulePolicy(overlap=OVERLAPS[overlap]),
                state=ScheduleState(paused=paused, note="paused at creation" if paused else None),
            ),
        )
        return name

    def _schedule(self, name: str) -> ScheduleHandle:
        return self.temporal.get_schedule_handle(name)

    async def list(self) -> list[ScheduleSummary]:
        """The schedules that start sessions (others on the namespace are left out)."""
        found = []
        async for listed in await self.temporal.list_schedules():
            try:
                described = await self._schedule(listed.id).describe()
            except RPCError as error:  # deleted since it was listed (the list lags)
                if error.status == RPCStatusCode.NOT_FOUND:
                    continue
                raise
            action = described.schedule.action
            if not isinstance(action, ScheduleActionStartWorkflow):
                continue
            if action.workflow != WORKFLOW_NAME:
                continue
            info, state = described.info, described.schedule.state
            found.append(
                ScheduleSummary(
                    name=listed.id,
                    paused=state.paused,
                    note=state.note or "",
                    next_runs=list(info.next_action_times[:3]),
                    recent_runs=[
                        a.action.workflow_id
                        for a in info.recent_actions
                        if hasattr(a.action, "workflow_id")
                    ],
                )
            )
        return sorted(found, key=lambda s: s.name)

    async def runs(self, name: str, *, limit: int = 100) -> builtins.list[SessionSummary]:
        """The sessions ``name`` started, newest first."""
        _check_name(name)
        where = f'TemporalScheduledById = "{name}"'
        return await list_sessions(self.temporal, limit=limit, where=where)

    async def pause(self, name: str, note: str | None = None) -> None:
        await self._schedule(name).pause(note=note)

    async def unpause(self, name: str, note: str | None = None) -> None:
        await self._schedule(name).unpause(note=note)

    async def trigger(self, name: str) -> None:
        """A run now, under the schedule's overlap policy."""
        await self._schedule(name).trigger()

    async def backfill(
        self, name: str, start: datetime, end: datetime, overlap: Overlap | None = None
    ) -> None:
        """The runs the schedule would have started between ``start`` and ``end``."""
        policy = OVERLAPS[overlap] if overlap is not None else None
        await self._schedule(name).backfill(ScheduleBackfill(start, end, overlap=policy))

    async def delete(self, name: str) -> None:
        """No more runs (the sessions it started are kept)."""
        await self._schedule(name).delete()


def _check_name(name: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,100}", name):
        raise ValueError(f"schedule name {name!r}: letters, digits, '_', '.', '-' only")
