"""AgentClient: start sessions, talk to them, decide approvals, read them back.

Everything goes through Temporal (signals, queries, visibility), so any process that
can reach the server can follow any session, and none of them holds its state.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import structlog
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent.agents import Agent, OutputT, RunResult
from durable_agent.core import (
    DEFAULT_TASK_QUEUE,
    EARLIER_HISTORY_SIGNAL,
    INLINE_HISTORY_MESSAGES,
    WORKFLOW_NAME,
    AgentInput,
    AgentResult,
    AgentSpec,
    ApproverKey,
    AssistantMessage,
    BudgetSignal,
    CancelTurnSignal,
    Ended,
    EndSessionSignal,
    FlushSignal,
    LiveEvent,
    Message,
    MoveToAgentSignal,
    PendingApproval,
    SendResult,
    SessionStatus,
    SystemMessage,
    UserMessage,
    start_title,
)
from durable_agent.payloads import CodecKeyError, check_fits
from durable_agent.temporal import ServerSettings, connect_client

from ._approvals import ApprovalDoors, DecisionRefusedError, UnknownApprovalError
from ._branches import SessionBranches
from ._evals import SessionEvals
from ._live_reader import OFFSET_QUERY, read_live_events
from ._queries import Unanswered, no_worker_error, patient_query
from ._resumption import StillRunning, ended_run
from ._schedules import SessionSchedules
from ._types import (
    MessageRefusedError,
    NoWorkerError,
    SessionChange,
    SessionClosedError,
    SessionExistsError,
    SessionNotFoundError,
    SessionSummary,
    SpecError,
    WaitOutcome,
    parse_spec,
    refusal,
)
from ._versions import SessionVersions, version_of
from ._watch import SessionWatch

__all__ = [
    "AgentClient",
    "DecisionRefusedError",
    "MessageRefusedError",
    "NoWorkerError",
    "SessionChange",
    "SessionClosedError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionSummary",
    "SpecError",
    "UnknownApprovalError",
    "WaitOutcome",
    "parse_spec",
]

log = structlog.get_logger("durable_agent.client")

MESSAGES_PAGE = 2000
"""Messages one ``messages`` query asks for (the workflow also caps a page by size)."""
PENDING_PAGE = 1000
"""Waiting calls one ``pending_approvals`` query asks for (some 250 KB)."""


class AgentClient(
    ApprovalDoors, SessionWatch, SessionBranches, SessionEvals, SessionSchedules, SessionVersions
):
    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = DEFAULT_TASK_QUEUE,
        query_timeout: float = 15.0,
        approver_key: ApproverKey | None = None,
        agents: Sequence[Agent[Any]] = (),
    ) -> None:
        self.temporal = client
        self.agents = {member.name: member for agent in agents for member in agent.everyone()}
        """Agents ``run`` takes by name (and those they hand off to)."""
        self.task_queue = task_queue
        self.query_timeout = query_timeout
        """Seconds a read waits for a worker to answer (queries need a running worker)."""
        self.approver_key = approver_key
        """Signs this client's decisions (``approve``, ``deny``, ``respond``, revokes)."""

    @classmethod
    async def connect(
        cls, settings: ServerSettings | None = None, *, task_queue: str = DEFAULT_TASK_QUEUE
    ) -> AgentClient:
        return cls(await connect_client(settings or ServerSettings()), task_queue=task_queue)

    # --- sessions ---------------------------------------------------------------

    async def start(
        self,
        spec: AgentSpec | dict[str, Any] | str,
        message: str | UserMessage | None = None,
        *,
        session_id: str | None = None,
        history: Sequence[Message] = (),
        owner: str | None = None,
        restart: bool = False,
        resume: bool = False,
    ) -> str:
        """Start a session and return its id (the workflow id); ``owner``: who it
        belongs to (memo ``owner``, which the gateway checks). ``SessionExistsError``
        when a session with that id runs, or has run: ``resume`` goes on with an ended
        one's conversation (its array, read back by the worker, then ``message``; it
        keeps the ended run's owner);
        ``restart`` starts an empty one over it (its readers see a new conversation under
        the old id)."""
        if resume and (restart or history):
            raise ValueError("resume: takes neither restart nor history (it has its own)")
        # a long history goes apart (a signal sent with the start), but its last message
        # (input guardrails check it first when there is no ``message``): the run reads it
        # back a page at a time, never decoding it all in one task
        past = list(history)
        earlier = past[:-1] if len(past) > INLINE_HISTORY_MESSAGES else []
        inline = past[len(earlier) :]
        request = AgentInput(
            spec=parse_spec(spec), message=message, history=inline, earlier=len(earlier)
        )
        for value, what in ((request, "the session's start"), (earlier, "its history")):
            check_fits(self.temporal.data_converter, value, what)
        session_id = session_id or f"session-{uuid.uuid4().hex[:12]}"
        resumed = False
        if resume:
            request, owner, resumed = await self._going_on(session_id, request, owner)
        memo = {"owner": owner, "title": "" if resume else start_title(past, message)}
        try:
            await self.temporal.start_workflow(
                WORKFLOW_NAME, request, id=session_id, task_queue=self.task_queue,
                start_signal=EARLIER_HISTORY_SIGNAL if earlier else None,
                start_signal_args=[earlier] if earlier else [],
                memo={key: value for key, value in memo.items() if value} or None,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE if restart or resumed
                else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )  # fmt: skip
        except WorkflowAlreadyStartedError:
            raise SessionExistsError(session_id) from None
        return session_id

    async def _going_on(
        self, session_id: str, request: AgentInput, owner: str | None
    ) -> tuple[AgentInput, str | None, bool]:
        """``request`` going on with the session's ended run, if it has one, and the
        owner: the ended run's (a conversation keeps its owner whoever resumes it;
        ``owner`` only for one that had none); whether it does."""
        try:
            ended = await ended_run(self.temporal, session_id)
        except StillRunning:
            raise SessionExistsError(session_id) from None
        except RPCError as error:
            raise self._translate(session_id, error) from None
        if ended is None:
            return request, owner, False
        return request.model_copy(update={"resume": ended.resume}), ended.owner or owner, True

    async def owner(self, session_id: str) -> str | None:
        """Who the session belongs to (``None``: started without an owner)."""
        try:
            described = await self._handle(session_id).describe()
        except RPCError as error:
            raise self._translate(session_id, error) from None
        found: str = await described.memo_value("owner", "", type_hint=str)
        return found or None

    async def converse(
        self,
        session_id: str,
        message: str | UserMessage,
        spec: AgentSpec | dict[str, Any] | str,
        owner: str | None = None,
    ) -> SendResult:
        """Send a message to the session, starting it with ``spec`` if it does not run:
        one round trip (the ``send_message`` update with start). A session that has
        ended goes on with its conversation (a new run reads the ended run's array back,
        and keeps the ended run's owner). The answer says the message was queued
        (``before``: the messages ahead of it), or ``MessageRefusedError`` says why not."""
        check_fits(self.temporal.data_converter, message, "the message")
        request = AgentInput(spec=parse_spec(spec))
        try:
            return await self._send_with_start(session_id, message, request, owner)
        except WorkflowAlreadyStartedError:  # it ran and ended: its conversation goes on
            pass
        request, owner, _ = await self._going_on(session_id, request, owner)
        return await self._send_with_start(session_id, message, request, owner, again=True)

    async def _send_with_start(
        self,
        session_id: str,
        message: str | UserMessage,
        request: AgentInput,
        owner: str | None,
        *,
        again: bool = False,
    ) -> SendResult:
        """``send_message`` to the running session, or to one started with ``request``
        (never over an ended run unless ``again``: one that resumes it)."""
        start: WithStartWorkflowOperation[Any, AgentResult] = WithStartWorkflowOperation(
            WORKFLOW_NAME,
            request,
            id=session_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE if again
            else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            memo={"owner": owner} if owner else None,
        )  # fmt: skip
        try:
            result: SendResult = await self.temporal.execute_update_with_start_workflow(
                "send_message", message, start_workflow_operation=start, result_type=SendResult
            )
        except WorkflowAlreadyStartedError:
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await start.workflow_handle()  # the start's own copy of the error, taken
            raise
        except WorkflowUpdateFailedError as error:
            raise refusal(session_id, error) from None
        except RPCError as error:
            raise self._translate(session_id, error) from None
        return result

    async def inject(self, session_id: str, message: SystemMessage | AssistantMessage) -> None:
        """Add a system notice or an assistant message (a program's, not a person's: it
        starts no turn) at the session's next safe point (``MessageRefusedError``: why
        not, such as an assistant message with tool calls)."""
        check_fits(self.temporal.data_converter, message, "the message")
        try:
            await self._handle(session_id).execute_update("inject_message", message)
        except WorkflowUpdateFailedError as error:
            raise refusal(session_id, error) from None
        except RPCError as error:
            raise self._translate(session_id, error) from None

    async def send(self, session_id: str, message: str | UserMessage) -> int:
        """Send a user message: checked first (``MessageRefusedError`` says why one would be
        refused), then sent as a signal, queued for the next turn boundary; returns the
        message count before it, for ``wait(after=)``."""
        check_fits(self.temporal.data_converter, message, "the message")
        check: SendResult = await self._query(session_id, "message_check", SendResult, message)
        if check.problem is not None:
            raise MessageRefusedError(session_id, check.problem)
        await self._signal(session_id, "send_message", message)
        return check.before

    async def end(
        self, session_id: str, *, by: str | None = None, reason: str | None = None
    ) -> None:
        await self._signal(session_id, "end_session", EndSessionSignal(by=by, reason=reason))

    async def cancel_turn(
        self, session_id: str, *, by: str | None = None, reason: str | None = None
    ) -> None:
        """Stop the current turn, keep the session: a running model call or tool calls are
        cancelled, calls without a result get one saying so, the session waits for the
        next message. With no turn running it changes nothing (``status`` says so)."""
        await self._signal(session_id, "cancel_turn", CancelTurnSignal(by=by, reason=reason))

    async def flush(
        self, session_id: str, *, by: str | None = None, reason: str | None = None
    ) -> None:
        """Reset what later requests start from (the system messages and what follows).
        The marker joins the array when the current turn is over; nothing is deleted."""
        await self._signal(session_id, "flush", FlushSignal(by=by, reason=reason))

    async def move_to_agent(
        self, session_id: str, agent: str, *, by: str | None = None, reason: str | None = None
    ) -> None:
        """Move a swarm session to another agent: at the next safe point (between model
        calls, never inside a tool batch), as if the active agent had handed over.
        An unknown agent, one whose handoffs are refused, or a ``by`` the session's
        approvers do not include changes nothing (``status`` says so under
        ``rejected``)."""
        request = MoveToAgentSignal(agent=agent, by=by, reason=reason)
        await self._signal(session_id, "move_to_agent", request)

    async def set_budget(
        self,
        session_id: str,
        *,
        max_total_tokens: int | None = None,
        max_cost_usd: float | None = None,
        by: str | None = None,
    ) -> None:
        """Change the session's budget (a limit left ``None`` stays as it is). A raise
        is decided by the session's approvers, as a decision is: ``by`` must be one."""
        budget = BudgetSignal(max_total_tokens=max_total_tokens, max_cost_usd=max_cost_usd, by=by)
        await self._signal(session_id, "set_budget", budget)

    async def sessions(self, *, limit: int = 50, where: str = "") -> list[SessionSummary]:
        """Sessions on this server, newest first (Temporal visibility; ``where``: more
        of its list filter, as ``TemporalScheduledById = "nightly"``)."""
        found = []
        query = f'WorkflowType = "{WORKFLOW_NAME}"' + (f" AND {where}" if where else "")
        async for execution in self.temporal.list_workflows(query, limit=limit):
            found.append(
                SessionSummary(
                    session_id=execution.id,
                    status=execution.status.name if execution.status else "UNKNOWN",
                    started_at=execution.start_time,
                    closed_at=execution.close_time,
                    title=await _memo(execution, "title") or "",
                    owner=await _memo(execution, "owner"),
                    forked_from=await _memo(execution, "forked_from"),
                    forked_at=int(await _memo(execution, "forked_at") or 0) or None,
                    schedule=await _memo(execution, "schedule"),
                    version=version_of(execution),
                )
            )
        return found

    # --- reading ------------------------------------------------------------------

    async def messages(
        self, session_id: str, from_index: int = 0, *, limit: int | None = None
    ) -> list[Message]:
        """The array from ``from_index`` on (``limit``: at most that many). Read in pages,
        so a session of any length fits (one query answer may carry 4 MB)."""
        found: list[Message] = []
        while limit is None or len(found) < limit:
            want = MESSAGES_PAGE if limit is None else min(MESSAGES_PAGE, limit - len(found))
            start = from_index + len(found)
            page: list[Message] = await self._query(
                session_id, "messages", list[Message], start, want
            )
            found += page
            if not page:
                break
        return found

    async def status(self, session_id: str) -> SessionStatus:
        found: SessionStatus = await self._query(session_id, "status", SessionStatus)
        return found

    async def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        """Every call that waits, read ``PENDING_PAGE`` a query (a batch of thousands)."""
        found: list[PendingApproval] = []
        while True:
            page: list[PendingApproval] = await self._query(
                session_id, "pending_approvals", list[PendingApproval], len(found), PENDING_PAGE
            )
            found += page
            if len(page) < PENDING_PAGE:
                return found

    async def run(
        self,
        agent: Agent[OutputT] | str,
        message: str | UserMessage,
        *,
        session_id: str | None = None,
    ) -> RunResult[OutputT]:
        """Run ``agent`` (or the one of this client's ``agents`` by that name) on
        ``message`` to its answer, typed as its ``output_type`` (``AgentRunError`` when
        the session ends without one). Approvals it asks for wait for someone to decide
        them, as in any session."""
        if isinstance(agent, str):
            found = self.agents.get(agent)
            if found is None:
                listed = ", ".join(sorted(self.agents)) or "none: give AgentClient(agents=...)"
                raise LookupError(f"no agent {agent!r} on this client (agents: {listed})")
            agent = found
        started = await self.start(agent.spec(one_reply=True), message, session_id=session_id)
        return agent.output_of(started, await self.result(started))

    async def result(self, session_id: str) -> AgentResult:
        """How the session ended (waits for the end)."""
        return await self._handle(session_id).result()

    async def follow(
        self, session_id: str, *, after: int = -1, poll_seconds: float = 0.05
    ) -> AsyncIterator[LiveEvent]:
        """The session's live events after offset ``after`` (-1: from the first the
        log still holds), as they happen, until ``ended``: turns, model calls and their
        text and reasoning deltas, tools, approvals, messages, usage, errors, idle.
        Across continue-as-new too. A reader that resumes passes the offset of the last
        event it saw; one that fell behind the bounded log gets a ``gap`` first (the
        ``messages`` query still has every message)."""
        async for event in read_live_events(
            self._handle(session_id),
            self.temporal.data_converter.payload_converter,
            after=after,
            poll_seconds=poll_seconds,
            closed=lambda: self._ended_if_closed(session_id),
        ):
            yield event

    async def latest_offset(self, session_id: str) -> int:
        """The offset of the session's newest event (-1 before any): ``follow(after=``
        this ``)`` reads only what happens from now on."""
        count: int = await self._query(session_id, OFFSET_QUERY, int)  # asked as every read
        return count - 1

    async def _ended_if_closed(self, session_id: str) -> Ended | None:
        if not await self.has_ended(session_id):
            return None
        result = await self.result_if_closed(session_id)
        return Ended(result=result, error=None if result else "the session closed without a result")

    async def result_if_closed(self, session_id: str) -> AgentResult | None:
        try:
            return await self.result(session_id)
        except Exception:  # failed, terminated or timed out: no AgentResult to give
            return None

    async def has_ended(self, session_id: str) -> bool:
        """The session's newest run has ended (``SessionNotFoundError``: it never ran)."""
        try:
            description = await self._handle(session_id).describe()
        except RPCError as error:
            raise self._translate(session_id, error) from None
        return description.status not in (None, WorkflowExecutionStatus.RUNNING)

    # --- plumbing -------------------------------------------------------------------

    def _handle(self, session_id: str) -> WorkflowHandle[Any, AgentResult]:
        return self.temporal.get_workflow_handle(session_id, result_type=AgentResult)

    async def _signal(self, session_id: str, name: str, payload: Any) -> None:
        try:
            await self._handle(session_id).signal(name, payload)
        except RPCError as error:
            raise self._translate(session_id, error) from None

    async def _query(self, session_id: str, name: str, result_type: Any, *args: Any) -> Any:
        """A query that waits out a busy worker for up to ``query_timeout``."""
        handle = self._handle(session_id)
        try:
            return await patient_query(handle, name, list(args), result_type, self.query_timeout)
        except RPCError as error:
            raise self._translate(session_id, error) from None
        except Unanswered:
            queue, seconds = self.task_queue, self.query_timeout
            raise await no_worker_error(self.temporal, handle, queue, seconds) from None

    @staticmethod
    def _translate(session_id: str, error: RPCError) -> Exception:
        if error.status == RPCStatusCode.NOT_FOUND:
            if "already completed" in error.message:
                return SessionClosedError(session_id)
            if "namespace" in error.message.lower():
                return error  # the namespace itself (a server still starting, or a typo)
            return SessionNotFoundError(session_id)
        return error


async def _memo(execution: WorkflowExecution, key: str) -> str | None:
    """A memo value; ``None`` when absent, or when this client cannot decode it (a
    session encrypted with keys it lacks must not break a listing)."""
    try:
        found: str = await execution.memo_value(key, "", type_hint=str)
    except (KeyError, ValueError, TypeError, CodecKeyError) as error:
        log.warning("memo not readable", session_id=execution.id, key=key, error=str(error))
        return None
    return found or None
