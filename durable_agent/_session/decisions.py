"""Approvals as data: the pending calls and the decisions recorded for them, kept in the
part's slice of the session state (so they cross continue-as-new as they are). Pure: the time is
given: the Session says when a wait for decisions is over, and the workflow only times it.

A batch may ask thousands at once: what goes over many approvals goes over the list
once (``find_all``, ``open_all``, ``take_all``), never once per approval; and what
makes, decides or announces approvals one by one does at most a page of them a
workflow task (``page_for``).

Also people's decisions on the waiting calls, as the Session takes them (who may decide,
what a decision may ask, decisions passed on to a sub-agent, grants revoked, escalations),
and the standing grants an "always" decision makes, applied to the other waiting calls
of its batch a page at a time."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from durable_agent._contracts.approvals import (
    NO_WAITING_CALL,
    ApprovalSignal,
    ChildApprovals,
    DecisionKind,
    DecisionResult,
    EscalationNotice,
    Grant,
    PendingApproval,
    RevokeGrantSignal,
    TokenCheck,
    TokenVerdict,
    decision_digest,
)
from durable_agent._session.gate import as_validated
from durable_agent._spec.approval_policy import Escalation, tests_hold
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import ApprovalDecision, ApprovalRecord, RecordedDecision

from .gate import DECISION_KINDS, RECORDED_DECISIONS, Gate, arguments_of
from .requests import Requests
from .state import ApprovalsState, DecisionsState, Unverified
from .toolbox import Toolbox

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


# An "always" decision approves the other calls of its batch that wait and it covers,
# one page per workflow task: one grant over thousands of waiting calls would otherwise test
# and decide them all in the task its decision arrives in. The first page is decided
# there and then (a batch of a page is decided at once); the rest, from the
# loop, a short durable timer apart. Pure, like the Session it is part of.

class StandingGrants:
    def __init__(
        self,
        sweeps: dict[str, int],
        approvals: Approvals,
        gate: Gate,
        toolbox: Toolbox,
    ) -> None:
        self._sweeps = sweeps
        """Its slice of the session state: by grant id, how far into the pending calls
        each sweep has come."""
        self.approvals = approvals
        self.gate = gate
        self._toolbox = toolbox

    @property
    def going(self) -> bool:
        """A grant still has calls to approve (the next page waits for its task)."""
        return bool(self._sweeps)

    def clear(self) -> None:
        """The batch is over: whatever a sweep had left to approve left with it."""
        self._sweeps.clear()

    def start(self, grant: Grant) -> None:
        """A new grant: its first page of the waiting calls decided now."""
        self._sweeps[grant.grant_id] = 0
        self.go_on()

    def go_on(self) -> None:
        """Decide the next page of a grant's sweep (the slice says what is left).
        A sweep goes on to calls asked after its grant (a batch asked in pages): the
        gate, deciding them then, would have let the grant approve them too."""
        sweeps, pending = self._sweeps, self.approvals.asked()
        if not sweeps:
            return
        grant_id, start = next(iter(sweeps.items()))
        grant = self.gate.grant_named(grant_id)  # (revoked since: it approves no more)
        stop = start + self.approvals.page_for(len(pending) - start)
        if grant is not None:
            self._cover(grant, pending[start:stop])
        if grant is None or stop >= len(pending):
            del sweeps[grant_id]
        else:
            sweeps[grant_id] = stop

    def _cover(self, grant: Grant, waiting: list[PendingApproval]) -> None:
        """The calls among ``waiting`` that still wait and the grant covers, approved
        (their arguments judged only for a grant with tests; one record per rule)."""
        decided, tools = self.approvals.decided(), self._toolbox.active
        records: dict[str | None, ApprovalRecord] = {}
        for pending in waiting:
            if pending.tool_name != grant.tool or pending.approval_id in decided:
                continue
            if grant.matching:
                tool = tools.get(pending.tool_name)
                schema = tool.definition.parameters if tool is not None else None
                arguments = as_validated(arguments_of(pending.arguments), schema)
                if not tests_hold(grant.matching, arguments):
                    continue
            record = records.get(pending.rule)
            if record is None:
                record = records[pending.rule] = self.gate.granted(grant, grant.at, pending.rule)
            self.approvals.decide(pending.approval_id, record)


# People's decisions on a session's waiting calls, as the Session takes them: who may
# decide (approvers, signed tokens checked by the workers), what a decision may ask
# (edited arguments, a response, an "always" grant), decisions passed on to a sub-agent,
# grants revoked, and escalations to tell. Pure, like the Session it is part of.

def child_approval_id(child_id: str, approval_id: str) -> str:
    """A child's approval as its parent shows it: ``<agent>-t<turn>c<slot>/<its id>``."""
    return f"{child_id.rsplit('--', 1)[-1]}/{approval_id}"


#: The end of a child's session id: the turn and slot of the parent's call that started
#: it, and the parent's run (``-t<turn>c<slot>-<run>``).
_STARTED_BY = re.compile(r"-t(\d+)c(\d+)-[^-]*$")


def child_approval(child_id: str, pending: PendingApproval) -> PendingApproval:
    """A child's waiting call as its parent shows it: under the id the parent decides it
    by, and at the turn and slot of the parent's call that waits on it (the sub-agent's
    call), so a screen puts it on that call and never on another call of the batch."""
    update: dict[str, object] = {"approval_id": child_approval_id(child_id, pending.approval_id)}
    started_by = _STARTED_BY.search(child_id)
    if started_by is not None:
        update.update(turn=int(started_by[1]), slot=int(started_by[2]))
    return pending.model_copy(update=update)


class Decisions:
    """The Session's collaborator for people's decisions: it records what arrives and
    answers why a decision cannot be taken; the Session alone decides what runs. Its
    slice of the carried state holds signed decisions waiting for their check and the
    sub-agents' approvals decided through this session."""

    def __init__(
        self,
        spec: AgentSpec,
        state: DecisionsState,
        approvals: Approvals,
        gate: Gate,
        sweeps: StandingGrants,
        toolbox: Toolbox,
        requests: Requests,
        run_chain: str = "",
        run: str = "",
    ) -> None:
        self.spec = spec
        self.state = state
        self.approvals = approvals
        self.gate = gate
        self.sweeps = sweeps
        self._toolbox = toolbox
        self._requests = requests
        self.outcomes: dict[str, DecisionResult | str] = {}
        """What became of each ``decide`` update (by update id): accepted, or why not."""
        self.run_chain = run_chain
        """The session's first run id: what signed revocations are bound to."""
        self.run = run
        """The run asking for approvals now: what signed decisions on its calls name."""

    def reject(self, text: str) -> str:
        """Keep a refusal that changed nothing visible in ``status``."""
        return self._requests.reject(text)

    @property
    def unverified(self) -> bool:
        """Signed decisions wait for the workers to check their tokens."""
        return bool(self.state.unverified)

    def forwards_for(self, child_id: str) -> list[tuple[str, ApprovalSignal]]:
        """The decisions to pass on to the child (the signal's name and argument), in the
        order they were made."""
        return [(verb, signal) for child, verb, signal in self.state.forwards if child == child_id]

    def forwards_taken(self, child_id: str) -> None:
        """The child's decisions are the caller's to send from now on."""
        forwards = self.state.forwards
        forwards[:] = [forward for forward in forwards if forward[0] != child_id]

    def batch_over(self) -> None:
        """The batch's sub-agents are all over: their approvals and decisions with them."""
        self.state.child_pending.clear()
        self.state.forwards.clear()

    def decision_arrived(
        self,
        signal: ApprovalSignal,
        decision: RecordedDecision,
        now: datetime,
        key: str | None = None,
    ) -> str | None:
        """A person decides a pending call (``key``: the ``decide`` update waiting for the
        outcome). A signed decision waits for its token to be checked; anything that may
        not change the call is rejected, visibly, and changes nothing."""
        kind = DECISION_KINDS[decision]
        child = self._child_of(signal.approval_id)
        if child is not None and signal.token is not None:
            return self._refuse(key, self.decision_problem(signal, decision) or "")
        if child is not None:  # a sub-agent's approval, decided through this session
            problem = self.decision_problem(signal, decision)
            if problem is not None:
                return self._refuse(key, problem)
            child_id, own_id = child
            forwarded = signal.model_copy(update={"approval_id": own_id})
            verb = "approve" if kind == "approve" else kind
            self.state.forwards.append((child_id, verb, forwarded))
            self.state.child_pending[child_id] = [
                p for p in self.state.child_pending[child_id] if p.approval_id != own_id
            ]
            self._settle(key, DecisionResult(approval_id=signal.approval_id, decision=kind))
            return None
        problem = self.decision_problem(signal, decision)
        if problem is not None:
            return self._refuse(key, problem)
        if signal.token is not None:
            waiting = Unverified(kind=kind, decision=signal, key=key)
            self.state.unverified = [*self.state.unverified, waiting]
            return None
        self._apply_decision(signal, kind, now, verified=False, key=key)
        return None

    def decision_problem(self, signal: ApprovalSignal, decision: RecordedDecision) -> str | None:
        """Why a decision would change nothing (the ``decide`` update's validator asks
        this before anything is recorded); ``None``: it may."""
        aid = signal.approval_id
        child = self._child_of(aid)
        if child is not None and signal.token is not None:
            return (
                f"{decision} {aid!r}: a signed decision on a sub-agent's call goes to its own "
                f"session ({child[0]}, approval {child[1]}), which checks the token"
            )
        if child is not None:  # this session's identity rule first, then the child's
            what = f"{decision} {aid!r}"
            waiting = next(
                p for p in self.state.child_pending[child[0]] if p.approval_id == child[1]
            )
            approvers = self.spec.approvals.approvers
            if approvers is None:
                approvers = waiting.approvers
            problem: str | None = self.gate.identity_problem(signal.by, approvers, False, what)
            return problem
        what = f"{decision} {aid!r}"
        pending = self.approvals.find(aid)
        if pending is None:
            return f"{what}: {NO_WAITING_CALL} (a call that a worker runs returns its own result)"
        decided = self.approvals.decided().get(aid)
        if decided is not None:
            return f"{what}: already {decided.decision}"
        tool = self._toolbox.active.get(pending.tool_name)
        problem = self.gate.request_problem(signal, DECISION_KINDS[decision], tool)
        if problem is None and signal.token is None:
            problem = self.gate.identity_problem(
                signal.by, pending.approvers, False, what, bool(pending.signed_only)
            )
        return problem

    def _apply_decision(
        self,
        signal: ApprovalSignal,
        kind: DecisionKind,
        now: datetime,
        *,
        verified: bool,
        key: str | None,
    ) -> None:
        pending = self.approvals.find(signal.approval_id)
        assert pending is not None
        record = self.gate.record_for(signal, kind, pending, now, verified)
        grant = None
        if signal.always is not None:
            grant = self.gate.grant(signal, pending, now, verified)
            record = record.model_copy(update={"grant": grant.grant_id})
        self.approvals.decide(pending.approval_id, record)
        if signal.arguments is not None or kind == "respond":
            self.approvals.accept(pending.approval_id, signal)
        if grant is not None:  # it also approves the calls of the batch it covers
            self.sweeps.start(grant)
        result = DecisionResult(
            approval_id=pending.approval_id,
            decision=kind,
            by=signal.by,
            verified=verified,
            grant_id=None if grant is None else grant.grant_id,
        )
        self._settle(key, result)

    def _settle(self, key: str | None, outcome: DecisionResult | str) -> None:
        if key is not None:
            self.outcomes[key] = outcome

    def _refuse(self, key: str | None, text: str) -> str:
        self._settle(key, text)
        return self.reject(text)

    def revoke_requested(self, signal: RevokeGrantSignal, key: str | None = None) -> str | None:
        """Take back a standing grant: later calls of its tool are asked about again."""
        problem = self.revoke_problem(signal)
        if problem is not None:
            return self._refuse(key, problem)
        if signal.token is not None:
            waiting = Unverified(kind="revoke", revoke=signal, key=key)
            self.state.unverified = [*self.state.unverified, waiting]
            return None
        self.gate.revoke(signal.grant_id)
        revoked = DecisionResult(approval_id=signal.grant_id, decision="revoke", by=signal.by)
        self._settle(key, revoked)
        return None

    def revoke_problem(self, signal: RevokeGrantSignal) -> str | None:
        what = f"revoke {signal.grant_id!r}"
        if self.gate.grant_named(signal.grant_id) is None:
            held = ", ".join(g.grant_id for g in self.gate.grants) or "none"
            return f"{what}: no such grant (grants: {held})"
        if signal.token is None:
            return self.gate.identity_problem(signal.by, self.spec.approvals.approvers, False, what)
        return None

    def tokens_to_check(self) -> list[TokenCheck]:
        """Each signed decision, with the digest its token must sign: the decision as it
        arrived, the call as it waits (with the run that asked for it), and for a
        revocation this session's run chain."""
        checks = []
        pending = self.approvals.find_all() if self.state.unverified else {}
        for item in self.state.unverified:
            if item.decision is not None:
                subject, token = item.decision.approval_id, item.decision.token
                call = pending.get(subject)
            else:
                assert item.revoke is not None
                subject, token, call = item.revoke.grant_id, item.revoke.token, None
            assert token is not None
            digest = decision_digest(item.kind, subject, self.run_chain, call, item.decision)
            checks.append(TokenCheck(token=token, subject=subject, action=item.kind, digest=digest))
        return checks

    def tokens_checked(self, verdicts: list[TokenVerdict], now: datetime) -> None:
        """The workers' word on each signed decision: who signed it, or why it counts for
        nothing. The signer must be one who may decide, as for unsigned ones."""
        # those checked (more may have arrived while the workers checked them)
        checked = len(verdicts)
        waiting = self.state.unverified[:checked]
        self.state.unverified = self.state.unverified[checked:]
        for item, verdict in zip(waiting, verdicts, strict=True):
            if item.revoke is not None:
                revoke = item.revoke.model_copy(update={"by": verdict.approver, "token": None})
                what = f"revoke {revoke.grant_id!r}"
                problem = self._token_problem(verdict, what, self.spec.approvals.approvers)
                if problem is None and self.gate.grant_named(revoke.grant_id) is None:
                    problem = f"{what}: no such grant"
                if problem is not None:
                    self._refuse(item.key, problem)
                    continue
                self.gate.revoke(revoke.grant_id)
                result = DecisionResult(
                    approval_id=revoke.grant_id, decision="revoke", by=revoke.by, verified=True
                )
                self._settle(item.key, result)
                continue
            assert item.decision is not None and item.kind != "revoke"
            kind: DecisionKind = item.kind
            signal = item.decision.model_copy(update={"by": verdict.approver})
            recorded = RECORDED_DECISIONS[kind]
            what = f"{recorded} {signal.approval_id!r}"
            pending = self.approvals.find(signal.approval_id)
            problem = None
            if pending is None or signal.approval_id in self.approvals.decided():
                problem = self.decision_problem(signal, recorded) or f"{what}: already decided"
            else:
                problem = self._token_problem(verdict, what, pending.approvers)
            if problem is not None:
                self._refuse(item.key, problem)
                continue
            self._apply_decision(signal, kind, now, verified=True, key=item.key)

    def _token_problem(
        self, verdict: TokenVerdict, what: str, approvers: list[str] | None
    ) -> str | None:
        if verdict.error is not None:
            return f"{what}: the token was refused ({verdict.error})"
        return self.gate.identity_problem(verdict.approver, approvers, True, what)

    def escalations(self) -> EscalationNotice | None:
        """Calls whose deadline passed once, for their second group to hear of."""
        escalation = self.spec.approvals.escalation
        to_notify = self.approvals.to_notify()
        if not to_notify or escalation is None:
            return None
        pending = self.approvals.find_all()
        waiting = [pending.get(aid) for aid in to_notify]
        return EscalationNotice(
            notifier=escalation.notifier,
            notify=escalation.notify,
            approvals=[p for p in waiting if p is not None],
        )

    def escalation_sent(self) -> None:
        self.approvals.notified()

    def work_waiting(self) -> bool:
        """Work for the loop while people decide: a token to check, a second group to
        tell, or a grant's next page of approvals."""
        return self.unverified or bool(self.approvals.to_notify()) or self.sweeps.going

    def child_approvals(self, report: ChildApprovals, running: set[str]) -> None:
        """A sub-agent session's undecided approvals (it reports each change, one page per
        signal). Only a child this session runs now (``running``) may add to the view
        (anyone can send a signal); an empty report only takes a child's entries away."""
        if not report.pending:
            self.state.child_pending.pop(report.child_id, None)
        elif report.child_id in running:
            earlier = self.state.child_pending.get(report.child_id, [])
            pages = [*earlier, *report.pending] if report.continued else report.pending
            self.state.child_pending[report.child_id] = pages
        else:
            self.reject(f"child_approvals: {report.child_id!r} is no sub-agent of this session")

    def _child_of(self, approval_id: str) -> tuple[str, str] | None:
        """(child session id, the child's own approval id) for a child's approval id as
        this session shows it (``<agent>-t<turn>c<slot>/<id>``)."""
        for child_id, pending in self.state.child_pending.items():
            for p in pending:
                if approval_id == child_approval_id(child_id, p.approval_id):
                    return child_id, p.approval_id
        return None

    def pending_approvals(self) -> list[PendingApproval]:
        """Undecided approvals: this session's, then its sub-agents' (their ids prefixed
        with the child's call, decided through this session)."""
        mine = self.approvals.undecided()
        children = [
            child_approval(child_id, p)
            for child_id, pending in self.state.child_pending.items()
            for p in pending
        ]
        return mine + children
