"""The session's entry points: signals and updates record into the Session, queries read it.
The main loop (AgentWorkflow) decides what follows.

A person's decision comes through signals (``approve``, ``deny``, ``respond``,
``revoke_grant``: the ``temporal`` CLI's way, refused visibly in ``status`` when they
change nothing) or updates (``decide``, ``revoke``: the caller learns at once whether it
was accepted, and why not). A signed decision waits for the main loop to have its token
checked."""

from __future__ import annotations

from typing import Any, TypeVar

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.approvals import (
        ApprovalPolicyView,
        ApprovalSignal,
        ChildApprovals,
        DecisionRequest,
        DecisionResult,
        PendingApproval,
        RevokeGrantSignal,
    )
    from durable_agent._contracts.boundary import (
        BUILD_CHANGED_SIGNAL,
        EARLIER_HISTORY_SIGNAL,
        MOVE_TO_CURRENT_SIGNAL,
        BudgetSignal,
        CancelTurnSignal,
        EndSessionSignal,
        FlushSignal,
        MoveToAgentSignal,
        SendResult,
        SessionStatus,
    )
    from durable_agent._contracts.wake_ups import (
        CANCEL_WAKE_UP_UPDATE,
        SET_WAKE_UP_UPDATE,
        WAKE_UPS_QUERY,
        WakeUp,
        WakeUpRequest,
    )
    from durable_agent._errors import Failure
    from durable_agent._session import RECORDED_DECISIONS, Session
    from durable_agent._session.protocol import (
        BudgetChanged,
        CancelRequested,
        CapacityKept,
        Checked,
        ChildApprovalsReported,
        DecisionArrived,
        DecisionOutcomeTold,
        EndRequested,
        Event,
        FlushRequested,
        Injected,
        MessageArrived,
        MoveRequested,
        MoveToCurrentAsked,
        Refused,
        RevokeRequested,
        WakeUpCancelled,
        WakeUpSet,
    )
    from durable_agent._spec.endpoints import CAPACITY_READY_SIGNAL
    from durable_agent._wire.messages import (
        AssistantMessage,
        Message,
        RecordedDecision,
        SystemMessage,
        UserMessage,
    )

    from .live_feed import LiveFeed
    from .starting import InvalidInput, decode
    from .telemetry import warn


#: About how much of the array one page of the ``messages`` query holds (an answer may
#: carry 4 MB at most).
PAGE_BYTES = 1_000_000
#: The default of a signal argument a sender may leave out.
NO_PAYLOAD = RawValue(Payload())
SignalT = TypeVar("SignalT", CancelTurnSignal, FlushSignal, BudgetSignal)


def _user_message(message: str | UserMessage) -> UserMessage:
    """A sender may send the text alone."""
    return UserMessage(content=message) if isinstance(message, str) else message


class SessionHandlers:
    _session: Session
    _feed: LiveFeed
    _reading_back = 0
    """Messages a starting run still reads back (after continue-as-new by reference, or
    from the ended run it resumes): a message arriving meanwhile comes after them."""

    def _count_before(self) -> int:
        count = len(self._session.messages)
        starting = self._session.view.loop.phase == "starting"
        return max(count, self._reading_back) if starting else count

    def _tell(self, event: Event) -> None:
        """Hand ``event`` to the Session; a refusal is logged (``status`` lists it)."""
        refused = self._session.handle(event, workflow.now())
        if refused is not None:
            warn(self._session, "signal changed nothing: %s", refused)

    def _refused(self, text: str) -> None:
        self._tell(Refused(text))

    # --- messages and requests: record only ----------------------------------------------

    @workflow.update(name="send_message")
    def send_message_now(self, message: str | UserMessage) -> SendResult:
        """``send_message`` as an update: the caller learns at once that the message was
        queued (and the count of messages before it), or why it was refused."""
        before = self._count_before()
        self._session.handle(MessageArrived(_user_message(message)), workflow.now())
        return SendResult(before=before, queued=self._session.view.loop.queued)

    @send_message_now.validator
    def _message_acceptable(self, message: str | UserMessage) -> None:
        problem = self._session.view.refusal(MessageArrived(_user_message(message)))
        if problem is not None:
            raise ValueError(problem)

    @workflow.query
    def message_check(self, message: str | UserMessage) -> SendResult:
        """What ``send_message`` would do with a message now: the count of messages before
        it and those queued, or why it would be refused (``problem``)."""
        view = self._session.view
        return SendResult(
            before=self._count_before(),
            queued=view.loop.queued,
            problem=view.refusal(MessageArrived(_user_message(message))),
        )

    @workflow.signal
    def send_message(self, raw: RawValue) -> None:
        message = self._read(raw, str | UserMessage, "send_message: unreadable message")
        if message is not None:
            self._tell(MessageArrived(_user_message(message)))

    @workflow.update(name="inject_message")
    def inject_message_now(self, message: SystemMessage | AssistantMessage) -> None:
        """A system notice or an assistant message a program adds (not a person's: it
        starts no turn), at the next checkpoint; the caller learns at once if it was
        refused."""
        self._session.handle(Injected(message), workflow.now())

    @inject_message_now.validator
    def _injection_acceptable(self, message: SystemMessage | AssistantMessage) -> None:
        problem = self._session.view.refusal(Injected(message))
        if problem is not None:
            raise ValueError(problem)

    @workflow.signal(name="inject_message")
    def inject_message(self, raw: RawValue) -> None:
        read = self._read(raw, SystemMessage | AssistantMessage, "inject_message: unreadable")
        if read is not None:
            self._tell(Injected(read))

    @workflow.signal
    def end_session(self, raw: RawValue = NO_PAYLOAD) -> None:
        request = EndSessionSignal()
        if raw is not NO_PAYLOAD:
            try:
                request = decode(raw, EndSessionSignal | None) or request
            except InvalidInput as error:
                text = f"end_session: unreadable signal ({error}); ending anyway"
                self._refused(text)
        self._tell(EndRequested(request))

    @workflow.signal
    def cancel_turn(self, raw: RawValue = NO_PAYLOAD) -> None:
        request = self._optional(raw, CancelTurnSignal, "cancel_turn")
        if request is not None:
            self._tell(CancelRequested(request))

    @workflow.signal(name=CAPACITY_READY_SIGNAL)
    def capacity_ready(self, raw: RawValue = NO_PAYLOAD) -> None:
        """The limiter kept capacity for the waiting model call. Trusted for nothing: a
        forged one only makes the call ask its limiter again sooner."""
        self._tell(CapacityKept())

    @workflow.signal
    def flush(self, raw: RawValue = NO_PAYLOAD) -> None:
        request = self._optional(raw, FlushSignal, "flush")
        if request is not None:
            self._tell(FlushRequested(request))

    @workflow.signal
    def set_budget(self, raw: RawValue) -> None:
        request = self._optional(raw, BudgetSignal, "set_budget")
        if request is not None:
            self._tell(BudgetChanged(request))

    @workflow.signal
    def move_to_agent(self, raw: RawValue) -> None:
        """A person moves a swarm session to another agent (a name, or ``{"agent": ...,
        "by": ..., "reason": ...}``)."""
        request = self._read(raw, str | MoveToAgentSignal, "move_to_agent: unreadable signal")
        if isinstance(request, str):
            request = MoveToAgentSignal(agent=request)
        if request is not None:
            self._tell(MoveRequested(request))

    @workflow.signal(name=MOVE_TO_CURRENT_SIGNAL)
    def move_to_current_build(self, raw: RawValue = NO_PAYLOAD) -> None:
        """A person sends the session to the build the workers' owner made current, at
        its next turn boundary (a ``pinned`` agent waits for this; an ``auto`` one goes
        anyway). Trusted for nothing more: the owner chose where it goes."""
        self._tell(MoveToCurrentAsked())

    @workflow.signal(name=BUILD_CHANGED_SIGNAL)
    def build_changed(self, raw: RawValue = NO_PAYLOAD) -> None:
        """Records nothing: its workflow task lets the loop see that another build is
        current (``make_current`` sends it, so idle ``auto`` sessions move at once)."""

    @workflow.signal(name=EARLIER_HISTORY_SIGNAL)
    def earlier_history(self, raw: RawValue) -> None:
        """Records nothing, and never decodes it (one task would decode every message): a
        worker reads the history sent with the start from the run's history (only one
        that came before the run's first task: ``started_conversation``)."""

    def _read(self, raw: RawValue, kind: Any, unreadable: str) -> Any:
        """A signal's argument as ``kind``; ``None`` (rejected, visibly) if unreadable."""
        try:
            return decode(raw, kind)
        except InvalidInput as error:
            self._refused(f"{unreadable} ({error})")
            return None

    def _optional(self, raw: RawValue, kind: type[SignalT], name: str) -> SignalT | None:
        """A signal's argument (a sender may leave it out); ``None`` if unreadable."""
        if raw is NO_PAYLOAD:
            return kind()
        try:
            return decode(raw, kind | None) or kind()
        except InvalidInput as error:
            self._refused(f"{name}: unreadable signal ({error})")
            return None

    # --- decisions: record only -------------------------------------------------------

    @workflow.signal
    def approve(self, raw: RawValue) -> None:
        self._record_decision(raw, "approved")

    @workflow.signal
    def deny(self, raw: RawValue) -> None:
        self._record_decision(raw, "denied")

    @workflow.signal
    def respond(self, raw: RawValue) -> None:
        """A person gives the call's result; the tool does not run."""
        self._record_decision(raw, "responded")

    def _record_decision(self, raw: RawValue, decision: RecordedDecision) -> None:
        try:
            signal: ApprovalSignal = decode(raw, ApprovalSignal)
        except InvalidInput as error:
            self._refused(f"{decision}: unreadable signal ({error})")
            return
        self._tell(DecisionArrived(signal, decision))
        self._feed.observe()  # readers see the decision now, not when the batch is decided

    @workflow.signal
    def revoke_grant(self, raw: RawValue) -> None:
        try:
            signal: RevokeGrantSignal = decode(raw, RevokeGrantSignal)
        except InvalidInput as error:
            self._refused(f"revoke_grant: unreadable signal ({error})")
            return
        self._tell(RevokeRequested(signal))

    @workflow.update
    async def decide(self, request: DecisionRequest) -> DecisionResult:
        """Approve, deny or respond, answered at once: accepted (with who decided, and
        whether a token proved it) or refused with the reason, changing nothing."""
        key = workflow.current_update_info().id  # type: ignore[union-attr]
        signal = request.as_signal()
        recorded = RECORDED_DECISIONS[request.decision]
        self._session.handle(DecisionArrived(signal, recorded, key), workflow.now())
        self._feed.observe()
        return await self._outcome(key)

    @decide.validator
    def _decision_acceptable(self, request: DecisionRequest) -> None:
        decision = DecisionArrived(request.as_signal(), RECORDED_DECISIONS[request.decision])
        problem = self._session.view.refusal(decision)
        if problem is not None:
            raise ValueError(problem)

    @workflow.update
    async def revoke(self, request: RevokeGrantSignal) -> DecisionResult:
        """Take back a standing grant, answered at once."""
        key = workflow.current_update_info().id  # type: ignore[union-attr]
        self._session.handle(RevokeRequested(request, key), workflow.now())
        return await self._outcome(key)

    @revoke.validator
    def _revoke_acceptable(self, request: RevokeGrantSignal) -> None:
        problem = self._session.view.refusal(RevokeRequested(request))
        if problem is not None:
            raise ValueError(problem)

    async def _outcome(self, key: str) -> DecisionResult:
        session, view = self._session, self._session.view
        await workflow.wait_condition(lambda: view.approvals.decision_outcome(key) is not None)
        outcome = view.approvals.decision_outcome(key)
        session.handle(DecisionOutcomeTold(key), workflow.now())
        assert outcome is not None
        if isinstance(outcome, str):
            raise ApplicationError(outcome, type=Failure.DECISION_REFUSED, non_retryable=True)
        return outcome

    @workflow.query
    def decision_problem(self, request: DecisionRequest) -> str | None:
        """Why a decision would change nothing now (``None``: it would be taken): what
        the ``decide`` update's validator says, for clients that decide by signal."""
        decision = DecisionArrived(request.as_signal(), RECORDED_DECISIONS[request.decision])
        return self._session.view.refusal(decision)

    @workflow.query
    def revoke_problem(self, request: RevokeGrantSignal) -> str | None:
        return self._session.view.refusal(RevokeRequested(request))

    @workflow.query
    def approval_policy(self) -> ApprovalPolicyView:
        """The spec's rules and approvers, each tool's approvers, and standing grants."""
        return self._session.view.approvals.policy()

    # --- queries -----------------------------------------------------------------------------

    @workflow.query
    def messages(self, from_index: int = 0, limit: int = 0) -> list[Message]:
        """The array from ``from_index`` on; with a ``limit``, one page: at most that many
        messages and about ``PAGE_BYTES`` of them (at least one), so a reader of a long
        session pages through it within what one answer may carry."""
        messages, start = self._session.messages, max(from_index, 0)
        if limit <= 0:
            return messages[start:]
        page: list[Message] = []
        size = 0
        for index in range(start, min(start + limit, len(messages))):
            size += messages.size_of(index)
            if page and size > PAGE_BYTES:
                break
            page.append(messages[index])
        return page

    @workflow.query
    def pending_approvals(self, from_index: int = 0, limit: int = 0) -> list[PendingApproval]:
        """The calls that wait, from ``from_index`` on (``limit``: at most that many, a page
        a reader of thousands asks for: one answer carries at most 2 MB)."""
        pending = self._session.view.approvals.pending()[max(from_index, 0) :]
        return pending[:limit] if limit > 0 else pending

    @workflow.signal
    def child_approvals(self, raw: RawValue) -> None:
        """A sub-agent session reports its undecided approvals."""
        try:
            report: ChildApprovals = decode(raw, ChildApprovals)
        except InvalidInput as error:
            self._refused(f"child_approvals: unreadable ({error})")
            return
        self._tell(ChildApprovalsReported(report))

    @workflow.query
    def status(self) -> SessionStatus:
        build = workflow.info().get_current_deployment_version()
        version = f"{build.deployment_name}:{build.build_id}" if build else None
        return self._session.view.status().model_copy(update={"version": version})


# A starter's wake-ups: the updates that set and cancel one, and the query that lists
# them. They only record into the Session (events ``WakeUpSet``, ``WakeUpCancelled``),
# which keeps every rule: a request past the owner's bounds is refused by the update's
# validator, so it leaves nothing in the history and schedules nothing. The session's
# main loop measures its wait again after each change.

class WakeUpHandlers:
    _session: Session

    def _told(self, event: Checked) -> None:
        """Hand the Session ``event``; its refusal is the update's error."""
        refused = self._session.handle(event, workflow.now())
        if refused is not None:
            raise ValueError(refused)

    def _acceptable(self, event: Checked) -> None:
        refused = self._session.view.refusal(event)
        if refused is not None:
            raise ValueError(refused)

    @workflow.update(name=SET_WAKE_UP_UPDATE)
    def set_wake_up(self, request: WakeUpRequest) -> WakeUp:
        """Set a wake-up for the session: the wake-up as it was kept (its id, its first
        due time)."""
        self._told(WakeUpSet(request, workflow.now()))
        return self.wake_ups()[-1]  # the newest is last

    @set_wake_up.validator
    def _wake_up_acceptable(self, request: WakeUpRequest) -> None:
        self._acceptable(WakeUpSet(request, workflow.now()))

    @workflow.update(name=CANCEL_WAKE_UP_UPDATE)
    def cancel_wake_up(self, wake_up_id: str) -> None:
        """Cancel one of the session's wake-ups by id: it never fires again."""
        self._told(WakeUpCancelled(wake_up_id))

    @cancel_wake_up.validator
    def _cancel_acceptable(self, wake_up_id: str) -> None:
        self._acceptable(WakeUpCancelled(wake_up_id))

    @workflow.query(name=WAKE_UPS_QUERY)
    def wake_ups(self) -> list[WakeUp]:
        """The wake-ups the session holds, in the order they were set."""
        return self._session.view.status().wake_ups
