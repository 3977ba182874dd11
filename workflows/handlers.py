"""The session's signal and query handlers: signals record into the Session, queries
read it. The main loop (AgentWorkflow) decides what follows."""

from __future__ import annotations

from typing import Any, TypeVar

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from durable_agent.core import (
        BUILD_CHANGED_SIGNAL,
        CAPACITY_READY_SIGNAL,
        EARLIER_HISTORY_SIGNAL,
        MOVE_TO_CURRENT_SIGNAL,
        AssistantMessage,
        BudgetSignal,
        CancelTurnSignal,
        ChildApprovals,
        EndSessionSignal,
        FlushSignal,
        Message,
        MoveToAgentSignal,
        PendingApproval,
        SendResult,
        SessionStatus,
        SystemMessage,
        UserMessage,
    )
    from durable_agent.session import Session

    from .approval_handlers import ApprovalHandlers
    from .inputs import InvalidInput, decode
    from .patches import patched

#: Patch id (never reuse or rename): the text of content parts counts against
#: ``max_message_chars`` (runs before it counted plain-string messages only).
MESSAGE_PARTS_PATCH = "message-parts-counted"
#: About how much of the array one page of the ``messages`` query holds (an answer may
#: carry 4 MB at most).
PAGE_BYTES = 1_000_000
#: The default of a signal argument a sender may leave out.
NO_PAYLOAD = RawValue(Payload())
SignalT = TypeVar("SignalT", CancelTurnSignal, FlushSignal, BudgetSignal)


def _user_message(message: str | UserMessage) -> UserMessage:
    """A sender may send the text alone."""
    return UserMessage(content=message) if isinstance(message, str) else message


class SessionHandlers(ApprovalHandlers):
    _session: Session
    _reading_back = 0
    """Messages a starting run still reads back (after continue-as-new by reference, or
    from the ended run it resumes): a message arriving meanwhile comes after them."""

    def _count_before(self) -> int:
        count = len(self._session.messages)
        return max(count, self._reading_back) if self._session.phase == "starting" else count

    # --- signals: record only ------------------------------------------------------------

    @workflow.update(name="send_message")
    def send_message_now(self, message: str | UserMessage) -> SendResult:
        """``send_message`` as an update: the caller learns at once that the message was
        queued (and the count of messages before it), or why it was refused."""
        before = self._count_before()
        self._message_arrived(_user_message(message))
        return SendResult(before=before, queued=len(self._session.state.inbox))

    @send_message_now.validator
    def _message_acceptable(self, message: str | UserMessage) -> None:
        problem = self._session.requests.message_problem(_user_message(message))
        if problem is not None:
            raise ValueError(problem)

    @workflow.query
    def message_check(self, message: str | UserMessage) -> SendResult:
        """What ``send_message`` would do with a message now: the count of messages before
        it and those queued, or why it would be refused (``problem``)."""
        session = self._session
        return SendResult(
            before=self._count_before(),
            queued=len(session.state.inbox),
            problem=session.requests.message_problem(_user_message(message)),
        )

    @workflow.signal
    def send_message(self, raw: RawValue) -> None:
        message = self._read(raw, str | UserMessage, "send_message: unreadable message")
        if message is not None:
            self._rejected(self._message_arrived(_user_message(message)))

    @workflow.update(name="inject_message")
    def inject_message_now(self, message: SystemMessage | AssistantMessage) -> None:
        """A system notice or an assistant message a program adds (not a person's: it
        starts no turn), at the next safe point; the caller learns at once if it was
        refused."""
        self._session.requests.inject_arrived(message, workflow.now())

    @inject_message_now.validator
    def _injection_acceptable(self, message: SystemMessage | AssistantMessage) -> None:
        problem = self._session.requests.inject_problem(message)
        if problem is not None:
            raise ValueError(problem)

    @workflow.signal(name="inject_message")
    def inject_message(self, raw: RawValue) -> None:
        read = self._read(raw, SystemMessage | AssistantMessage, "inject_message: unreadable")
        if read is not None:
            self._rejected(self._session.requests.inject_arrived(read, workflow.now()))

    def _message_arrived(self, message: UserMessage) -> str | None:
        requests = self._session.requests
        requests.parts_counted = patched(MESSAGE_PARTS_PATCH)
        return requests.message_arrived(message, workflow.now())

    @workflow.signal
    def end_session(self, raw: RawValue = NO_PAYLOAD) -> None:
        request = EndSessionSignal()
        if raw is not NO_PAYLOAD:
            try:
                request = decode(raw, EndSessionSignal | None) or request
            except InvalidInput as error:
                text = f"end_session: unreadable signal ({error}); ending anyway"
                self._rejected(self._session.requests.reject(text))
        self._session.requests.end_requested(request)

    @workflow.signal
    def cancel_turn(self, raw: RawValue = NO_PAYLOAD) -> None:
        request = self._optional(raw, CancelTurnSignal, "cancel_turn")
        if request is not None:
            self._rejected(self._session.cancel_requested(request))

    @workflow.signal(name=CAPACITY_READY_SIGNAL)
    def capacity_ready(self, raw: RawValue = NO_PAYLOAD) -> None:
        """The limiter kept room for the waiting model call. Trusted for nothing: a
        forged one only makes the call ask its limiter again sooner."""
        self._session.capacity_ready = True

    @workflow.signal
    def flush(self, raw: RawValue = NO_PAYLOAD) -> None:
        request = self._optional(raw, FlushSignal, "flush")
        if request is not None:
            self._session.requests.flush_requested(request)

    @workflow.signal
    def set_budget(self, raw: RawValue) -> None:
        request = self._optional(raw, BudgetSignal, "set_budget")
        if request is not None:
            self._rejected(self._session.requests.budget_changed(request))

    @workflow.signal
    def move_to_agent(self, raw: RawValue) -> None:
        """A person moves a swarm session to another agent (a name, or ``{"agent": ...,
        "by": ..., "reason": ...}``)."""
        request = self._read(raw, str | MoveToAgentSignal, "move_to_agent: unreadable signal")
        if isinstance(request, str):
            request = MoveToAgentSignal(agent=request)
        if request is not None:
            self._rejected(self._session.requests.move_requested(request))

    @workflow.signal(name=MOVE_TO_CURRENT_SIGNAL)
    def move_to_current_build(self, raw: RawValue = NO_PAYLOAD) -> None:
        """A person sends the session to the build the workers' owner made current, at
        its next turn boundary (a ``pinned`` agent waits for this; an ``auto`` one goes
        anyway). Trusted for nothing more: the owner chose where it goes."""
        self._session.state.move_to_current = True

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
            self._rejected(self._session.requests.reject(f"{unreadable} ({error})"))
            return None

    def _optional(self, raw: RawValue, kind: type[SignalT], name: str) -> SignalT | None:
        """A signal's argument (a sender may leave it out); ``None`` if unreadable."""
        if raw is NO_PAYLOAD:
            return kind()
        try:
            return decode(raw, kind | None) or kind()
        except InvalidInput as error:
            self._rejected(self._session.requests.reject(f"{name}: unreadable signal ({error})"))
            return None

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
        pending = self._session.decisions.pending_approvals()[max(from_index, 0) :]
        return pending[:limit] if limit > 0 else pending

    @workflow.signal
    def child_approvals(self, raw: RawValue) -> None:
        """A sub-agent session reports its undecided approvals."""
        try:
            report: ChildApprovals = decode(raw, ChildApprovals)
        except InvalidInput as error:
            self._rejected(self._session.requests.reject(f"child_approvals: unreadable ({error})"))
            return
        self._session.decisions.child_approvals(report)

    @workflow.query
    def status(self) -> SessionStatus:
        build = workflow.info().get_current_deployment_version()
        version = f"{build.deployment_name}:{build.build_id}" if build else None
        return self._session.status().model_copy(update={"version": version})
