"""Approvals as data: the pending calls and the decisions recorded for them, kept in the
part's slice of the session state (so they cross continue-as-new as they are). Pure: the time is
given: the Session says when a wait for decisions is over, and the workflow only times it.

A batch may ask thousands at once: what goes over many approvals goes over the list
once (``find_all``, ``open_all``, ``take_all``), never once per approval; and what
makes, decides or announces approvals one by one does at most a page of them a
workflow task (``page_for``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from durable_agent._contracts._approval_contracts import ApprovalSignal, PendingApproval
from durable_agent._spec._approval_policy import Escalation
from durable_agent._wire._messages import ApprovalDecision, ApprovalRecord

from ._state import ApprovalsState

#: Approvals one workflow task asks, decides by a grant or announces at most: a batch of
#: thousands that wait for people is asked in pages, a durable timer apart.
APPROVALS_PER_PAGE = 250


class Approvals:
    def __init__(
        self,
        state: ApprovalsState,
        escalation: Escalation | None = None,
        paging: Callable[[], object] = lambda: None,
    ) -> None:
        self._state = state
        self._escalation = escalation
        self._paging = paging
        """Told each time there is more than a page to do (where the previous release's
        runs recorded a marker: the workflow consumes it)."""
        self.newly_decided: list[str] = []
        """Ids decided since the live feed last took them, in order (not carried: a new
        run's feed counts the decisions it carries as told)."""
        self.defaults_left = False
        """The last ``apply_defaults`` found more calls past their deadline than a page."""
        self._index: dict[str, PendingApproval] = {}
        self._indexed: tuple[int, int] | None = None
        """The list (its ``id``) and length ``_index`` was made for: kept up as pages are
        opened and taken, made again when the list was replaced."""

    def page_for(self, count: int) -> int:
        """How many of ``count`` approvals' worth of work one task does."""
        if count <= APPROVALS_PER_PAGE:
            return max(count, 0)
        self._paging()
        return APPROVALS_PER_PAGE

    def asked(self) -> list[PendingApproval]:
        """Every approval asked and not yet taken into its batch, decided or not."""
        return self._state.pending

    def decided(self) -> Mapping[str, ApprovalRecord]:
        """The decisions recorded and not yet taken into their batch, by approval id."""
        return self._state.decisions

    def accept(self, aid: str, signal: ApprovalSignal) -> None:
        """Keep what a decision carries beyond its verdict (edited arguments, a response)."""
        self._state.accepted[aid] = signal

    def accepted(self, aid: str) -> ApprovalSignal | None:
        return self._state.accepted.get(aid)

    def to_notify(self) -> list[str]:
        """Approval ids escalated whose second group is still to be told."""
        return self._state.to_notify

    def notified(self) -> None:
        """The second groups were told of every escalation so far."""
        self._state.to_notify = []

    def find(self, aid: str) -> PendingApproval | None:
        return self.find_all().get(aid)

    def find_all(self) -> Mapping[str, PendingApproval]:
        """Every pending approval by id (the first, were an id there twice): an index
        kept with the list, so a page of a batch of thousands looks up only its own."""
        pending = self._state.pending
        if self._indexed != (id(pending), len(pending)):
            self._index = {}
            for approval in pending:
                self._index.setdefault(approval.approval_id, approval)
            self._indexed = (id(pending), len(pending))
        return self._index

    def open_all(self, approvals: list[PendingApproval]) -> None:
        """Ask for decisions; an approval carried over continue-as-new keeps its deadline."""
        pending, known = self._state.pending, self.find_all()
        for approval in approvals:
            if approval.approval_id not in known:
                self._index[approval.approval_id] = approval
                pending.append(approval)
        self._indexed = (id(pending), len(pending))

    def undecided(self) -> list[PendingApproval]:
        decided = self._state.decisions
        return [p for p in self._state.pending if p.approval_id not in decided]

    def all_decided(self, ids: list[str]) -> bool:
        return all(map(self._state.decisions.__contains__, ids))

    def decide(self, aid: str, record: ApprovalRecord) -> None:
        """Record a decision (the Session has checked that it may change something)."""
        self._state.decisions[aid] = record
        self.newly_decided.append(aid)

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
        """Decide the calls whose deadline has passed with their policy's default; with an
        escalation, a call's first deadline is extended instead and a second group asked.
        A page of them (one record for each default, one new list); ``defaults_left`` says
        whether more passed."""
        wanted, state, escalation = set(ids), self._state, self._escalation
        passed = [
            p
            for p in state.pending
            if p.approval_id in wanted
            and p.approval_id not in state.decisions
            and p.deadline is not None
            and p.deadline <= now
        ]
        page = passed[: self.page_for(len(passed))]
        records: dict[tuple[ApprovalDecision, bool], ApprovalRecord] = {}
        escalated: dict[str, PendingApproval] = {}
        for pending in page:
            if escalation is not None and pending.escalated_to is None:
                escalated[pending.approval_id] = _escalated(pending, escalation)
                continue
            key = (default_for(pending), bool(pending.escalated_to))
            record = records.get(key)
            if record is None:
                record = records[key] = ApprovalRecord(
                    decision=key[0],
                    at=now,
                    timed_out=True,
                    reason="no decision before the approval deadline",
                    escalated=True if key[1] else None,
                )
            self.decide(pending.approval_id, record)
        if escalated:
            state.pending = [escalated.get(p.approval_id, p) for p in state.pending]
            state.to_notify = [*state.to_notify, *escalated]
        self.defaults_left = len(page) < len(passed)

    def close_all(self, ids: list[str], by: str | None, reason: str, now: datetime) -> None:
        """Deny whatever is still undecided (the session is ending)."""
        denied = ApprovalRecord(decision="denied", by=by, at=now, reason=reason)
        for aid in ids:
            if aid not in self._state.decisions:
                self.decide(aid, denied)

    def take_all(self, aids: list[str]) -> list[ApprovalRecord]:
        """Decided calls leave the pending list (with what their decisions carried): their
        records, in the order asked. A batch's pages leave from the front of the list."""
        pending = self._state.pending
        if [p.approval_id for p in pending[: len(aids)]] == aids:
            self.find_all()  # (the index, up to date)
            del pending[: len(aids)]
            for aid in aids:
                self._index.pop(aid, None)
            self._indexed = (id(pending), len(pending))
        else:
            leaving = set(aids)
            self._state.pending = [p for p in pending if p.approval_id not in leaving]
        for aid in aids:
            self._state.accepted.pop(aid, None)
        return [self._state.decisions.pop(aid) for aid in aids]


def _escalated(pending: PendingApproval, escalation: Escalation) -> PendingApproval:
    """A call past its first deadline: a later one, and the second group among those who
    may decide (told, but not made deciders, of a tool whose owner named its approvers)."""
    assert pending.deadline is not None
    approvers = pending.approvers
    if approvers is not None and not pending.signed_only:
        approvers = [*approvers, *escalation.notify]
    return pending.model_copy(
        update={
            "deadline": pending.deadline + timedelta(seconds=escalation.extend_seconds),
            "escalated_to": list(escalation.notify),
            "approvers": approvers,
        }
    )
