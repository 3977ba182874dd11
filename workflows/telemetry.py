"""What a session tells its operators: its approvals and phases as the worker's
metrics, and the workflow's log lines.

The metrics go through temporalio's workflow metric meter: not recorded during replay,
so a replayed session counts once.

Sessions by phase: ``durable_agent_session_phase_entered`` minus
``durable_agent_session_phase_left`` for a phase (a run that continues as new leaves
its phase; the next run enters ``starting``). Approvals pending: requested minus
decided.

Log lines go through ``workflow.logger`` (``session_log``), each with the session, run,
turn, attempt and agent as fields."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta

from temporalio import workflow
from temporalio.common import MetricHistogramTimedelta

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.approvals import PendingApproval
    from durable_agent._session import Session
    from durable_agent._wire.messages import ApprovalRecord


class SessionMetrics:
    def __init__(self) -> None:
        self._phase: str | None = None

    def phase(self, phase: str) -> None:
        if phase == self._phase:
            return
        meter = workflow.metric_meter()
        if self._phase is not None:
            self._left(self._phase)
        meter.create_counter(
            "durable_agent_session_phase_entered", "session runs entering a phase"
        ).add(1, {"phase": phase})
        self._phase = phase

    def handed_over(self) -> None:
        """The run continues as new: it leaves its phase (the next run counts itself)."""
        if self._phase is not None:
            self._left(self._phase)
            self._phase = None

    def _left(self, phase: str) -> None:
        workflow.metric_meter().create_counter(
            "durable_agent_session_phase_left", "session runs leaving a phase"
        ).add(1, {"phase": phase})

    def approvals_requested(self, asked: list[PendingApproval]) -> None:
        """Approvals asked in one look, counted once per tool (a batch asks thousands)."""
        tools = Counter(pending.tool_name for pending in asked)
        if not tools:
            return
        counter = workflow.metric_meter().create_counter(
            "durable_agent_approvals_requested", "tool calls a person was asked to decide"
        )
        for tool, count in tools.items():
            counter.add(count, {"tool": tool})

    def approvals_decided(
        self, decided: list[tuple[PendingApproval | None, ApprovalRecord]]
    ) -> None:
        """Decisions seen in one look: counted once per kind, each one's wait recorded."""
        if not decided:
            return
        meter = workflow.metric_meter()
        counter = meter.create_counter(
            "durable_agent_approvals_decided", "approvals decided, by decision"
        )
        waits = meter.create_histogram_timedelta(
            "durable_agent_approval_wait", "from asking a person to their decision", "ms"
        )
        kinds: Counter[tuple[str, str]] = Counter()
        waits_of: dict[tuple[str, str], MetricHistogramTimedelta] = {}  # labelled once
        for pending, record in decided:
            kind = (record.decision, str(bool(record.timed_out)).lower())
            kinds[kind] += 1
            if pending is not None and record.at is not None:
                if kind not in waits_of:
                    labels = {"decision": kind[0], "timed_out": kind[1]}
                    waits_of[kind] = waits.with_additional_attributes(labels)
                waits_of[kind].record(max(record.at - pending.requested_at, timedelta(0)))
        for (decision, timed_out), count in kinds.items():
            counter.add(count, {"decision": decision, "timed_out": timed_out})


# The workflow's log lines: temporalio's ``workflow.logger`` (nothing is written while
# a workflow replays, so a line is never repeated), each with the session, run, turn,
# attempt and agent as fields.

def session_log(session: Session, level: int, text: str, *args: object) -> None:
    info = workflow.info()
    context = {
        "session_id": info.workflow_id,
        "run_id": info.run_id,
        "turn": session.view.loop.turn,
        "attempt": info.attempt,
        "agent": session.view.model.agent_name,
        "phase": session.view.loop.phase,
    }
    workflow.logger.log(level, text, *args, extra=context)


def warn(session: Session, text: str, *args: object) -> None:
    session_log(session, logging.WARNING, text, *args)
