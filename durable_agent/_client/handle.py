"""``SessionHandle``: one session, as a client talks to it.

``AgentClient.session(session_id)`` makes one (nothing is asked of the server until a
method is called). It sends what people send (messages, requests, decisions), reads
what the session shows (its messages, status, waiting approvals, result, live events)
and branches it. Everything goes through Temporal: signals, updates, queries.

A decision is first checked against the session as it is now (the ``decision_problem``
query: what the ``decide`` update's validator says), so a caller learns at once why one
cannot apply; then it is sent as a signal, which is never lost, even while the session
continues as new. A signed decision's token is checked by the workers after that: one
they refuse changes nothing and is listed in ``status.rejected_signals``, and an
approval's record says ``verified`` when it counted. With an ``ApproverKey`` a decision
is signed; without one its ``by`` is a name as typed, which a session with an
allow-list may refuse.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Collection, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._agents import Agent, OutputT
from durable_agent._contracts.approvals import (
    NO_WAITING_CALL,
    ApprovalPolicyView,
    ApproverKey,
    DecisionKind,
    DecisionRequest,
    DecisionResult,
    PendingApproval,
    RevokeGrantSignal,
    decision_digest,
)
from durable_agent._contracts.boundary import (
    MOVE_TO_CURRENT_SIGNAL,
    WORKFLOW_NAME,
    AgentResult,
    BudgetSignal,
    CancelTurnSignal,
    EndSessionSignal,
    FlushSignal,
    MoveToAgentSignal,
    SendResult,
    SessionStatus,
)
from durable_agent._contracts.events import Ended, LiveEvent
from durable_agent._contracts.wake_ups import (
    CANCEL_WAKE_UP_UPDATE,
    SET_WAKE_UP_UPDATE,
    WAKE_UPS_QUERY,
    WakeUp,
    WakeUpRequest,
)
from durable_agent._errors import WakeUpRefused
from durable_agent._payloads.storage import check_fits
from durable_agent._spec.approval_policy import ArgumentTest, parse_test
from durable_agent._spec.document import AgentInput, AgentSpec, Fork
from durable_agent._wire.messages import AssistantMessage, Message, SystemMessage, UserMessage
from durable_agent._wire.transcript import fork_problem

from .reading import (
    OFFSET_QUERY,
    Unanswered,
    no_worker_error,
    patient_query,
    read_live_events,
    served_wait,
)
from .results import (
    Connection,
    DecisionRefusedError,
    MessageRefusedError,
    SessionChange,
    SessionClosedError,
    SessionExistsError,
    SessionFailedError,
    SessionNotFoundError,
    UnknownApprovalError,
    WaitOutcome,
    parse_spec,
    refusal,
)

MESSAGES_PAGE = 2000
"""Messages one ``messages`` query asks for (the workflow also caps a page by size)."""
PENDING_PAGE = 1000
"""Waiting calls one ``pending_approvals`` query asks for (some 250 KB)."""

Tests = Sequence[ArgumentTest | str]
"""Argument tests for an "always" approval: ``ArgumentTest``s or ``"$.amount <= 100"``."""


class SessionHandle:
    """One session: ``id`` is its workflow id."""

    def __init__(self, connection: Connection, session_id: str) -> None:
        self.id = session_id
        self._connection = connection
        self._handle: WorkflowHandle[Any, AgentResult] = connection.temporal.get_workflow_handle(
            session_id, result_type=AgentResult
        )

    def __repr__(self) -> str:
        return f"SessionHandle({self.id!r})"

    # --- what people send -----------------------------------------------------------

    async def send(self, message: str | UserMessage) -> int:
        """Send a user message: checked first (``MessageRefusedError`` says why one would
        be refused), then sent as a signal, queued for the next turn boundary; returns
        the message count before it, for ``wait(after=)``."""
        check_fits(self._connection.temporal.data_converter, message, "the message")
        check: SendResult = await self._query("message_check", SendResult, message)
        if check.problem is not None:
            raise MessageRefusedError(self.id, check.problem)
        await self._signal("send_message", message)
        return check.before

    async def inject(self, message: SystemMessage | AssistantMessage) -> None:
        """Add a system notice or an assistant message (a program's, not a person's: it
        starts no turn) at the session's next checkpoint (``MessageRefusedError``: why
        not, such as an assistant message with tool calls)."""
        check_fits(self._connection.temporal.data_converter, message, "the message")
        try:
            await self._handle.execute_update("inject_message", message)
        except WorkflowUpdateFailedError as error:
            raise refusal(self.id, error) from None
        except RPCError as error:
            raise self._translated(error) from None

    async def end(self, *, by: str | None = None, reason: str | None = None) -> None:
        await self._signal("end_session", EndSessionSignal(by=by, reason=reason))

    async def cancel_turn(self, *, by: str | None = None, reason: str | None = None) -> None:
        """Stop the current turn, keep the session: a running model call or tool calls
        are cancelled, calls without a result get one saying so, the session waits for
        the next message. With no turn running it changes nothing (``status`` says so)."""
        await self._signal("cancel_turn", CancelTurnSignal(by=by, reason=reason))

    async def flush(self, *, by: str | None = None, reason: str | None = None) -> None:
        """Reset what later requests start from (the system messages and what follows).
        The marker joins the array when the current turn is over; nothing is deleted."""
        await self._signal("flush", FlushSignal(by=by, reason=reason))

    async def move_to_agent(
        self, agent: str, *, by: str | None = None, reason: str | None = None
    ) -> None:
        """Move a swarm session to another agent: at the next checkpoint (between model
        calls, never inside a tool batch), as if the active agent had handed over. An
        unknown agent, one whose handoffs are refused, or a ``by`` the session's
        approvers do not include changes nothing (``status`` says so under
        ``rejected``)."""
        await self._signal("move_to_agent", MoveToAgentSignal(agent=agent, by=by, reason=reason))

    async def set_budget(
        self,
        *,
        max_total_tokens: int | None = None,
        max_cost_usd: float | None = None,
        by: str | None = None,
    ) -> None:
        """Change the session's budget (a limit left ``None`` stays as it is). A raise
        is decided by the session's approvers, as a decision is: ``by`` must be one."""
        budget = BudgetSignal(max_total_tokens=max_total_tokens, max_cost_usd=max_cost_usd, by=by)
        await self._signal("set_budget", budget)

    async def move_to_current(self) -> None:
        """Go to the current build at the next turn boundary (a ``pinned`` agent stays
        on its build until this; an idle session goes at once)."""
        await self._signal(MOVE_TO_CURRENT_SIGNAL, None)

    # --- decisions ------------------------------------------------------------------

    async def approve(
        self,
        approval_id: str,
        *,
        by: str | None = None,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
        always: Literal["tool", "matching"] | None = None,
        matching: Tests = (),
        key: ApproverKey | None = None,
    ) -> DecisionResult:
        """Run the call: as the model asked, or with ``arguments`` (checked against the
        tool's schema first). ``always``: approve later calls of this tool too (all, or
        those passing ``matching``) for the rest of the session."""
        tests = [t if isinstance(t, ArgumentTest) else parse_test(t) for t in matching]
        if tests and always is None:
            always = "matching"
        extra = {"arguments": arguments, "always": always, "matching": tests}
        return await self._decide("approve", approval_id, by, reason, key, extra)

    async def deny(
        self,
        approval_id: str,
        *,
        by: str | None = None,
        reason: str | None = None,
        key: ApproverKey | None = None,
    ) -> DecisionResult:
        """Refuse the call; the model reads ``reason``."""
        return await self._decide("deny", approval_id, by, reason, key, {})

    async def respond(
        self,
        approval_id: str,
        content: str,
        *,
        is_error: bool = False,
        by: str | None = None,
        reason: str | None = None,
        key: ApproverKey | None = None,
    ) -> DecisionResult:
        """Answer in the tool's place: ``content`` is the call's result; the tool does
        not run."""
        extra = {"content": content, "is_error": is_error}
        return await self._decide("respond", approval_id, by, reason, key, extra)

    async def commit_tool_output(
        self,
        approval_id: str,
        content: str,
        *,
        is_error: bool = False,
        by: str | None = None,
        key: ApproverKey | None = None,
    ) -> DecisionResult:
        """Give the output of a call whose tool takes it from outside (registered with
        ``external_output=True``; its pending approval says ``awaits_output``): the
        call's result is ``content``. The same decision as ``respond``, by the same
        people; a call that a worker runs returns its own result, and this refuses it."""
        return await self.respond(approval_id, content, is_error=is_error, by=by, key=key)

    async def revoke_grant(
        self, grant_id: str, *, by: str | None = None, key: ApproverKey | None = None
    ) -> DecisionResult:
        """Take back an "always" approval: later calls are asked about again."""
        by, token = await self._signature(grant_id, "revoke", by, key)
        request = RevokeGrantSignal(grant_id=grant_id, by=by, token=token)
        problem = await self._query("revoke_problem", str | None, request)
        if problem is not None:
            raise DecisionRefusedError(self.id, problem)
        await self._signal("revoke_grant", request)
        return DecisionResult(approval_id=grant_id, decision="revoke", by=request.by)

    async def _decide(
        self,
        kind: DecisionKind,
        approval_id: str,
        by: str | None,
        reason: str | None,
        key: ApproverKey | None,
        extra: dict[str, Any],
    ) -> DecisionResult:
        request = DecisionRequest(
            decision=kind, approval_id=approval_id, by=by, reason=reason, **extra
        )
        by, token = await self._signature(approval_id, kind, by, key, request)
        request = request.model_copy(update={"by": by, "token": token})
        problem = await self._query("decision_problem", str | None, request)
        if problem is not None:
            if NO_WAITING_CALL in problem:
                pending = [p.approval_id for p in await self.pending_approvals()]
                raise UnknownApprovalError(self.id, approval_id, pending)
            raise DecisionRefusedError(self.id, problem)
        await self._signal(kind, request.as_signal())
        return DecisionResult(approval_id=approval_id, decision=kind, by=request.by)

    async def _signature(
        self,
        subject: str,
        action: str,
        by: str | None,
        key: ApproverKey | None,
        decision: DecisionRequest | None = None,
    ) -> tuple[str | None, str | None]:
        """Who decides, and the token proving it: a key (this call's, else the client's)
        names its holder and signs the whole decision, the call as it waits and the
        session's run chain; without one ``by`` is as typed, unsigned."""
        key = key or self._connection.approver_key
        if key is None:
            return by, None
        call = None
        if decision is not None:
            pending = await self.pending_approvals()
            call = next((p for p in pending if p.approval_id == subject), None)
        signal = decision.as_signal() if decision is not None else None
        digest = decision_digest(action, subject, await self.run_chain(), call, signal)
        return key.name, key.sign(self.id, subject, action, digest=digest)

    # --- wake-ups ---------------------------------------------------------------------

    async def wake_up(
        self,
        text: str,
        *,
        at: datetime | None = None,
        after: timedelta | float | None = None,
        every: timedelta | float | None = None,
        cron: str | None = None,
        timezone: str = "UTC",
    ) -> WakeUp:
        """Set a wake-up: when it falls due the agent reads ``text`` (marked as a
        wake-up, not as the user's words) and starts a turn. Give one of ``at`` (a time
        with its zone), ``after`` (a delay), ``every`` (repeat at this interval, in
        seconds or as a ``timedelta``) or ``cron`` (a five-field rule in ``timezone``).
        ``WakeUpRefused`` names the owner's bound a request passes, or says the agent
        has no wake-ups."""

        def seconds(value: timedelta | float | None) -> float | None:
            return value.total_seconds() if isinstance(value, timedelta) else value

        repeat = seconds(every)
        request = WakeUpRequest(
            text=text,
            at=None if at is None else int(at.timestamp() * 1000),
            after_seconds=seconds(after),
            every_seconds=None if repeat is None else round(repeat),
            cron=cron,
            timezone=timezone,
        )
        found: WakeUp = await self._wake_up_update(SET_WAKE_UP_UPDATE, request, WakeUp)
        return found

    async def wake_ups(self) -> list[WakeUp]:
        """The wake-ups the session holds, in the order they were set."""
        found: list[WakeUp] = await self._query(WAKE_UPS_QUERY, list[WakeUp])
        return found

    async def cancel_wake_up(self, wake_up_id: str) -> None:
        """Cancel a wake-up by id: it never fires again (``WakeUpRefused``: no such id)."""
        await self._wake_up_update(CANCEL_WAKE_UP_UPDATE, wake_up_id, None)

    async def _wake_up_update(self, name: str, argument: Any, result_type: Any) -> Any:
        try:
            return await self._handle.execute_update(name, argument, result_type=result_type)
        except WorkflowUpdateFailedError as error:
            raise WakeUpRefused(f"session {self.id!r}: {refusal(self.id, error).reason}") from None
        except RPCError as error:
            raise self._translated(error) from None

    # --- reading --------------------------------------------------------------------

    async def messages(self, from_index: int = 0, *, limit: int | None = None) -> list[Message]:
        """The array from ``from_index`` on (``limit``: at most that many). Read in pages,
        so a session of any length fits (one query answer may carry 4 MB)."""
        found: list[Message] = []
        while limit is None or len(found) < limit:
            want = MESSAGES_PAGE if limit is None else min(MESSAGES_PAGE, limit - len(found))
            start = from_index + len(found)
            page: list[Message] = await self._query("messages", list[Message], start, want)
            found += page
            if not page:
                break
        return found

    async def status(self) -> SessionStatus:
        found: SessionStatus = await self._query("status", SessionStatus)
        return found

    async def pending_approvals(self) -> list[PendingApproval]:
        """Every call that waits, read ``PENDING_PAGE`` a query (a batch of thousands)."""
        found: list[PendingApproval] = []
        while True:
            page: list[PendingApproval] = await self._query(
                "pending_approvals", list[PendingApproval], len(found), PENDING_PAGE
            )
            found += page
            if len(page) < PENDING_PAGE:
                return found

    async def approval_policy(self) -> ApprovalPolicyView:
        """The session's rules, approvers and standing grants."""
        view: ApprovalPolicyView = await self._query("approval_policy", ApprovalPolicyView)
        return view

    async def result(self) -> AgentResult:
        """How the session ended (waits for the end); ``SessionFailedError`` (the reason
        first) when it failed without a result: a refused spec, say. ``NoWorkerError``
        when its next step has waited ``query_timeout`` seconds and no worker polls its
        queue (the session stays running: wait again once one does)."""
        connection = self._connection
        try:
            return await served_wait(
                connection.temporal,
                self._handle,
                connection.task_queue,
                connection.query_timeout,
                self._handle.result(),
            )
        except WorkflowFailureError as error:
            raise SessionFailedError(self.id, error) from error.cause

    async def output(self, agent: Agent[OutputT]) -> OutputT:
        """The session's answer as ``agent``'s ``output_type`` (waits for the end, as
        ``result``); ``AgentRunError`` (saying how it ended) when it ended without one."""
        return agent.output_of(self.id, await self.result()).output

    async def result_if_closed(self) -> AgentResult | None:
        try:
            return await self.result()
        except Exception:  # failed, terminated or timed out: no AgentResult to give
            return None

    async def has_ended(self) -> bool:
        """The session's newest run has ended (``SessionNotFoundError``: it never ran)."""
        try:
            description = await self._handle.describe()
        except RPCError as error:
            raise self._translated(error) from None
        return description.status not in (None, WorkflowExecutionStatus.RUNNING)

    async def started(self, *, timeout: float = 60, poll_seconds: float = 0.2) -> None:
        """Wait until the session exists: a child session its parent workflow is about to
        start, say (``run_child_agent``'s ``agent_session_id``). ``TimeoutError`` if it
        has not started within ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                while True:
                    try:
                        await self._handle.describe()
                        return
                    except RPCError as error:
                        if not isinstance(self._translated(error), SessionNotFoundError):
                            raise self._translated(error) from None
                    await asyncio.sleep(poll_seconds)
        except TimeoutError:
            raise TimeoutError(
                f"session {self.id!r} did not start within {timeout} s: is the workflow that "
                "starts it running, on a worker that polls its task queue?"
            ) from None

    async def owner(self) -> str | None:
        """Who the session belongs to (``None``: started without an owner)."""
        try:
            described = await self._handle.describe()
        except RPCError as error:
            raise self._translated(error) from None
        found: str = await described.memo_value("owner", "", type_hint=str)
        return found or None

    async def run_chain(self) -> str:
        """The session's first run id: the same across continue-as-new, new for a new
        session under the same id (what signed decisions are bound to)."""
        try:
            described = await self._handle.describe()
        except RPCError as error:
            raise self._translated(error) from None
        info = described.raw_description.workflow_execution_info
        return info.first_run_id or described.run_id or ""

    async def follow(
        self, *, after: int = -1, poll_seconds: float = 0.05
    ) -> AsyncIterator[LiveEvent]:
        """The session's live events after offset ``after`` (-1: from the first the
        log still holds), as they happen, until ``ended``: turns, model calls and their
        text and reasoning deltas, tools, approvals, messages, usage, errors, idle.
        Across continue-as-new too. A reader that resumes passes the offset of the last
        event it saw; one that fell behind the bounded log gets a ``gap`` first (the
        ``messages`` query still has every message)."""
        async for event in read_live_events(
            self._handle,
            self._connection.temporal.data_converter.payload_converter,
            after=after,
            poll_seconds=poll_seconds,
            closed=self._ended_if_closed,
        ):
            yield event

    async def latest_offset(self) -> int:
        """The offset of the session's newest event (-1 before any): ``follow(after=``
        this ``)`` reads only what happens from now on."""
        count: int = await self._query(OFFSET_QUERY, int)  # asked as every read
        return count - 1

    async def _ended_if_closed(self) -> Ended | None:
        if not await self.has_ended():
            return None
        result = await self.result_if_closed()
        return Ended(result=result, error=None if result else "the session closed without a result")

    async def watch(
        self, *, after: int = 0, poll_seconds: float = 0.1
    ) -> AsyncIterator[SessionChange]:
        """Changes from message index ``after`` on, until the session ends, read by
        polling its queries (``wait`` uses it): messages, status, approvals asked, a
        reply, the end. ``follow`` is the live, finer-grained stream."""
        cursor = replied_at = after
        announced: set[str] = set()
        last: SessionStatus | None = None
        delay = poll_seconds
        while True:
            closed = await self.has_ended()
            status = None if closed else await self.status()
            fresh = await self.messages(cursor)
            for message in fresh:
                yield SessionChange("message", message=message, index=cursor)
                cursor += 1
            if closed or status is None:
                yield SessionChange("ended", result=await self.result_if_closed())
                return
            changed = bool(fresh) or status != last
            if status != last:
                last = status
                yield SessionChange("status", status=status)
            for pending in status.pending_approvals:
                if pending.approval_id not in announced:
                    announced.add(pending.approval_id)
                    yield SessionChange("approval", status=status, pending=pending)
            idle = status.phase == "idle" and status.queued_messages == 0
            if idle and status.message_count == cursor and cursor > replied_at:
                replied_at = cursor
                yield SessionChange("reply", status=status)
            delay = poll_seconds if changed else min(delay * 1.5, 1.0)
            await asyncio.sleep(delay)

    async def wait(
        self,
        *,
        after: int = 0,
        answered: Collection[str] = (),
        timeout: float | None = None,
        poll_seconds: float = 0.1,
    ) -> WaitOutcome:
        """Wait until the session has answered beyond message index ``after``, asks for
        an approval (other than the ids in ``answered``, decisions already sent), or has
        ended (``watch``, stopped at the first of those)."""
        messages: list[Message] = []
        try:
            async with asyncio.timeout(timeout):
                async for event in self.watch(after=after, poll_seconds=poll_seconds):
                    if event.kind == "message" and event.message is not None:
                        messages.append(event.message)
                    elif event.kind == "approval" and event.status is not None:
                        if event.pending and event.pending.approval_id in answered:
                            continue
                        pending = [
                            p
                            for p in event.status.pending_approvals
                            if p.approval_id not in answered
                        ]
                        return WaitOutcome("approval", messages, event.status, pending)
                    elif event.kind == "reply":
                        return WaitOutcome("reply", messages, event.status, [])
                    elif event.kind == "ended":
                        return WaitOutcome("ended", messages, None, [], event.result)
        except TimeoutError:
            raise TimeoutError(f"session {self.id!r} did not answer within {timeout} s") from None
        raise AssertionError("watch ends with an 'ended' event")

    # --- branching ------------------------------------------------------------------

    async def fork(
        self,
        at: int,
        spec: AgentSpec | dict[str, Any] | str,
        message: str | UserMessage | None = None,
        *,
        new_session_id: str | None = None,
        owner: str | None = None,
    ) -> str:
        """Start a session whose conversation is the first ``at`` messages of this one,
        under ``spec`` (its instructions replace the branch's first system message), then
        ``message`` if given; the new session's id. The worker reads the messages from
        this session and stores them: nothing is copied into history and no model call
        is made again. With no message, a branch that ends with a user or tool message
        asks the model at once; one that ends with an answer waits. This session is not
        touched. ``ValueError`` when ``at`` is outside the array or splits a tool batch;
        ``owner``: this session's unless given. The branch's memo says where it came
        from (``forked_from``, ``forked_at``), and ``sessions`` lists it so."""
        parent = await self.messages(0, limit=at)
        problem = fork_problem(parent, at)
        if problem is not None:
            raise ValueError(problem)
        described = await self._handle.describe()
        owner = owner or await described.memo_value("owner", "", type_hint=str) or None
        request = AgentInput(
            spec=parse_spec(spec),
            message=message,
            fork=Fork(session_id=self.id, run_id=described.run_id, at=at),
        )
        temporal = self._connection.temporal
        check_fits(temporal.data_converter, request, "the branch's start")
        new_session_id = new_session_id or f"session-{uuid.uuid4().hex[:12]}"
        memo: dict[str, Any] = {"forked_from": self.id, "forked_at": str(at)}
        if owner:
            memo["owner"] = owner
        try:
            await temporal.start_workflow(
                WORKFLOW_NAME,
                request,
                id=new_session_id,
                task_queue=self._connection.task_queue,
                memo=memo,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            raise SessionExistsError(new_session_id) from None
        return new_session_id

    # --- talking to the workflow ----------------------------------------------------

    async def _signal(self, name: str, payload: Any) -> None:
        try:
            await self._handle.signal(name, payload)
        except RPCError as error:
            raise self._translated(error) from None

    async def _query(self, name: str, result_type: Any, *args: Any) -> Any:
        """A query that waits out a busy worker for up to the client's
        ``query_timeout``."""
        connection, handle = self._connection, self._handle
        seconds, queue = connection.query_timeout, connection.task_queue
        try:
            return await patient_query(handle, name, list(args), result_type, seconds)
        except RPCError as error:
            raise self._translated(error) from None
        except Unanswered:
            raise await no_worker_error(connection.temporal, handle, queue, seconds) from None

    def _translated(self, error: RPCError) -> Exception:
        return translated(self.id, error)


def translated(session_id: str, error: RPCError) -> Exception:
    """What a server error about a session means to the caller."""
    if error.status == RPCStatusCode.NOT_FOUND:
        if "already completed" in error.message:
            return SessionClosedError(session_id)
        if "namespace" in error.message.lower():
            return error  # the namespace itself (a server still starting, or a typo)
        return SessionNotFoundError(session_id)
    return error
