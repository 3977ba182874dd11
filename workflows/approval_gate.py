"""The approval gate: pending calls, the decisions signals record, and durable deadlines.

Deterministic workflow code. Signals only record here; the turn loop decides when to
wait and what a decision means for its slot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent.contracts import ApprovalSignal, PendingApproval
    from durable_agent.messages import ApprovalDecision, ApprovalRecord


class ApprovalGate:
    def __init__(
        self,
        pending: list[PendingApproval] | None = None,
        decisions: Mapping[str, ApprovalRecord] | None = None,
    ) -> None:
        self.pending: dict[str, PendingApproval] = {p.approval_id: p for p in pending or []}
        self.decisions: dict[str, ApprovalRecord] = dict(decisions or {})

    def open(self, approval: PendingApproval) -> None:
        """Ask for a decision; an approval carried over continue-as-new keeps its deadline."""
        self.pending.setdefault(approval.approval_id, approval)

    def undecided(self) -> list[PendingApproval]:
        return [p for aid, p in self.pending.items() if aid not in self.decisions]

    def all_decided(self, ids: list[str]) -> bool:
        return all(aid in self.decisions for aid in ids)

    def record(self, signal: ApprovalSignal, decision: ApprovalDecision) -> str | None:
        """Record a person's decision; return why it changed nothing, if it did not."""
        aid = signal.approval_id
        if aid not in self.pending:
            return f"{decision} {aid!r}: no pending approval has this id"
        if aid in self.decisions:
            return f"{decision} {aid!r}: already {self.decisions[aid].decision}"
        self.decisions[aid] = ApprovalRecord(
            decision=decision, by=signal.by, at=workflow.now(), reason=signal.reason
        )
        return None

    def next_deadline(self, ids: list[str]) -> datetime | None:
        deadlines = [
            self.pending[aid].deadline
            for aid in ids
            if aid not in self.decisions and self.pending[aid].deadline is not None
        ]
        return min(d for d in deadlines if d is not None) if deadlines else None

    def apply_defaults(
        self, ids: list[str], default_for: Callable[[PendingApproval], ApprovalDecision]
    ) -> None:
        """Decide every call whose deadline has passed with its policy's default."""
        now = workflow.now()
        for aid in ids:
            pending = self.pending[aid]
            if aid in self.decisions or pending.deadline is None or pending.deadline > now:
                continue
            self.decisions[aid] = ApprovalRecord(
                decision=default_for(pending),
                at=now,
                timed_out=True,
                reason="no decision before the approval deadline",
            )

    def close_all(self, ids: list[str], by: str | None, reason: str) -> None:
        """Deny whatever is still undecided (the session is ending)."""
        for aid in ids:
            self.decisions.setdefault(
                aid, ApprovalRecord(decision="denied", by=by, at=workflow.now(), reason=reason)
            )

    def take(self, aid: str) -> ApprovalRecord:
        del self.pending[aid]
        return self.decisions.pop(aid)

    async def wait(
        self,
        ids: list[str],
        default_for: Callable[[PendingApproval], ApprovalDecision],
        interrupted: Callable[[], bool],
    ) -> None:
        """Wait until every id is decided, deadlines pass (durable timers), or
        ``interrupted()`` says the loop must act first (end of session, continue-as-new)."""
        while not self.all_decided(ids) and not interrupted():
            deadline = self.next_deadline(ids)
            timeout = None
            if deadline is not None:
                timeout = deadline - workflow.now()
                if timeout <= timedelta(0):
                    self.apply_defaults(ids, default_for)
                    continue
            try:
                await workflow.wait_condition(
                    lambda: self.all_decided(ids) or interrupted(), timeout=timeout
                )
            except TimeoutError:
                self.apply_defaults(ids, default_for)
