"""Approvals as data: the pending calls and the decisions recorded for them, kept in the
session state itself (so they cross continue-as-new as they are). Pure: the time is
given, and waiting for decisions is the workflow's (``workflows/approval_wait.py``).

A batch may ask thousands at once: what goes over many approvals goes over the list
once (``find_all``, ``open_all``, ``take_all``), never once per approval."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from durable_agent.approval_contracts import PendingApproval
from durable_agent.approval_policy import Escalation
from durable_agent.messages import ApprovalDecision, ApprovalRecord
from durable_agent.workflows.session.state import SessionState


class Approvals:
    def __init__(self, state: SessionState, escalation: Escalation | None = None) -> None:
        self._state = state
        self._escalation = escalation

    def find(self, aid: str) -> PendingApproval | None:
        return next((p for p in self._state.pending if p.approval_id == aid), None)

    def find_all(self) -> dict[str, PendingApproval]:
        """Every pending approval by id (the first, were an id there twice, as ``find``)."""
        found: dict[str, PendingApproval] = {}
        for pending in self._state.pending:
            found.setdefault(pending.approval_id, pending)
        return found

    def open_all(self, approvals: list[PendingApproval]) -> None:
        """Ask for decisions; an approval carried over continue-as-new keeps its deadline."""
        known = {p.approval_id for p in self._state.pending}
        for approval in approvals:
            if approval.approval_id not in known:
                known.add(approval.approval_id)
                self._state.pending.append(approval)

    def undecided(self) -> list[PendingApproval]:
        decided = self._state.decisions
        return [p for p in self._state.pending if p.approval_id not in decided]

    def all_decided(self, ids: list[str]) -> bool:
        return all(aid in self._state.decisions for aid in ids)

    def decide(self, aid: str, record: ApprovalRecord) -> None:
        """Record a decision (the Session has checked that it may change something)."""
        self._state.decisions[aid] = record

    def next_deadline(self, ids: list[str]) -> datetime | None:
        wanted = set(ids)
        deadlines = [
            p.deadline
            for p in self._state.pending
            if p.approval_id in wanted
            and p.approval_id not in self._state.decisions
            and p.deadline is not None
        ]
        return min(deadlines) if deadlines else None

    def apply_defaults(
        self,
        ids: list[str],
        default_for: Callable[[PendingApproval], ApprovalDecision],
        now: datetime,
    ) -> None:
        """Decide every call whose deadline has passed with its policy's default; with an
        escalation, a call's first deadline is extended instead and a second group asked."""
        wanted = set(ids)
        for pending in [p for p in self._state.pending if p.approval_id in wanted]:
            aid = pending.approval_id
            if aid in self._state.decisions or pending.deadline is None or pending.deadline > now:
                continue
            escalation = self._escalation
            if escalation is not None and pending.escalated_to is None:
                self._escalate(pending, escalation)
                continue
            self._state.decisions[aid] = ApprovalRecord(
                decision=default_for(pending),
                at=now,
                timed_out=True,
                reason="no decision before the approval deadline",
                escalated=True if pending.escalated_to else None,
            )

    def _escalate(self, pending: PendingApproval, escalation: Escalation) -> None:
        assert pending.deadline is not None
        approvers = pending.approvers
        escalated = pending.model_copy(
            update={
                "deadline": pending.deadline + timedelta(seconds=escalation.extend_seconds),
                "escalated_to": list(escalation.notify),
                "approvers": None if approvers is None else [*approvers, *escalation.notify],
            }
        )
        state = self._state
        state.pending = [escalated if p is pending else p for p in state.pending]
        state.to_notify = [*state.to_notify, pending.approval_id]

    def close_all(self, ids: list[str], by: str | None, reason: str, now: datetime) -> None:
        """Deny whatever is still undecided (the session is ending)."""
        for aid in ids:
            self._state.decisions.setdefault(
                aid, ApprovalRecord(decision="denied", by=by, at=now, reason=reason)
            )

    def take_all(self, aids: list[str]) -> list[ApprovalRecord]:
        """Decided calls leave the books (with what their decisions carried): their
        records, in the order asked."""
        leaving = set(aids)
        self._state.pending = [p for p in self._state.pending if p.approval_id not in leaving]
        for aid in aids:
            self._state.accepted.pop(aid, None)
        return [self._state.decisions.pop(aid) for aid in aids]
