"""A session's approvals and phases as the worker's metrics, through temporalio's
workflow metric meter: not recorded during replay, so a replayed session counts once.

Sessions by phase: ``durable_agent_session_phase_entered`` minus
``durable_agent_session_phase_left`` for a phase (a run that continues as new leaves
its phase; the next run enters ``starting``). Approvals pending: requested minus
decided."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent.approval_contracts import PendingApproval
    from durable_agent.messages import ApprovalRecord


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

    def approval_requested(self, pending: PendingApproval) -> None:
        workflow.metric_meter().create_counter(
            "durable_agent_approvals_requested", "tool calls a person was asked to decide"
        ).add(1, {"tool": pending.tool_name})

    def approval_decided(self, pending: PendingApproval | None, record: ApprovalRecord) -> None:
        meter = workflow.metric_meter()
        labels = {"decision": record.decision, "timed_out": str(bool(record.timed_out)).lower()}
        meter.create_counter(
            "durable_agent_approvals_decided", "approvals decided, by decision"
        ).add(1, labels)
        if pending is not None and record.at is not None:
            meter.create_histogram_timedelta(
                "durable_agent_approval_wait", "from asking a person to their decision", "ms"
            ).record(max(record.at - pending.requested_at, timedelta(0)), labels)
