"""AgentClient: start sessions and reach them; each session through its handle.

Everything goes through Temporal (signals, updates, queries, visibility), so any
process that can reach the server can follow any session, and none of them holds its
state. ``session(id)`` is one session (``SessionHandle``: what people send and read);
``schedules``, ``versions`` and ``evals`` are what is about many.

Going on with a conversation whose session has ended (``ended_run``) is here too: a new
run under the same id picks the array up.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._agents import Agent, OutputT, RunResult
from durable_agent._connection import (
    DEFAULT_ADDRESS,
    ServerSettings,
    connect_client,
    hand_over_at_exit,
)
from durable_agent._contracts.approvals import ApproverKey
from durable_agent._contracts.boundary import (
    DEFAULT_TASK_QUEUE,
    EARLIER_HISTORY_SIGNAL,
    WORKFLOW_NAME,
    AgentResult,
    SendResult,
    SessionStatus,
)
from durable_agent._errors import DurableAgentError
from durable_agent._payloads.storage import check_fits
from durable_agent._spec.document import INLINE_HISTORY_MESSAGES, AgentInput, AgentSpec, Resumption
from durable_agent._wire.messages import Message, UserMessage, start_title
from durable_agent._wire.transcript import BranchDiff, diff_branches

from .handle import SessionHandle, translated
from .reading import OFFSET_QUERY
from .results import (
    Connection,
    SessionExistsError,
    SessionSummary,
    SpecLike,
    list_sessions,
    parse_spec,
    refusal,
)

if TYPE_CHECKING:
    from .evals import Evals
    from .schedules import Schedules
    from .versions import Versions


# Going on with a conversation whose session has ended.
#
# A session ends (``end``, an idle timeout, a spent budget, a failure), but its
# conversation need not: a new run under the same id picks the array up. The caller only
# names the ended run; the worker reads its messages back from that run itself (never
# from the caller's input) and hands them to the new run by reference, as continue-as-new
# does. What the caller supplies here is where the old run stopped counting: its message
# count and its live events' offset, so readers' cursors go on.

@dataclass(frozen=True)
class EndedRun:
    """The newest run of a session, which has ended."""

    resume: Resumption
    owner: str | None
    """Whom the ended run belonged to (memo ``owner``): the new run keeps it."""


class StillRunning(DurableAgentError):
    """The session's newest run has not ended (there is nothing to resume)."""


async def ended_run(client: Client, session_id: str) -> EndedRun | None:
    """The session's ended newest run, or ``None`` when no run of it exists."""
    handle = client.get_workflow_handle(session_id, result_type=AgentResult)
    try:
        described = await handle.describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.status in (None, WorkflowExecutionStatus.RUNNING):
        raise StillRunning(session_id)
    owner: str = await described.memo_value("owner", "", type_hint=str)
    run = client.get_workflow_handle(session_id, run_id=described.run_id, result_type=AgentResult)
    count = offset = None
    try:
        result = await run.result(follow_runs=False)
        count, offset = result.message_count, result.events_offset
    except WorkflowFailureError:  # failed, terminated, timed out: no result to read
        pass
    if count is None:  # the run can still say, replayed by a worker
        status = await run.query("status", result_type=SessionStatus)
        count = status.message_count
    if offset is None:  # ended before results carried it
        offset = await run.query(OFFSET_QUERY, result_type=int)
    resume = Resumption(run_id=described.run_id, message_count=count, events_offset=offset)
    return EndedRun(resume=resume, owner=owner or None)


class AgentClient:
    """Sessions on one Temporal namespace. A program connects with ``await
    AgentClient.connect()`` (``$TEMPORAL_ADDRESS``, else 127.0.0.1:7233), or wraps a
    temporalio ``Client`` of its own, connected with ``plugins=[DurableAgentPlugin()]``:
    ``AgentClient(client)``. ``temporal`` is that client (``build_worker`` takes it).
    ``task_queue``: where sessions start (their workers poll it); ``query_timeout``:
    seconds a read waits for a worker to answer, and a wait for a session's end for a
    worker to poll its queue;
    ``approver_key``: signs this client's decisions; ``agents``: agents ``run`` takes by
    name (and those they hand off to)."""

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = DEFAULT_TASK_QUEUE,
        query_timeout: float = 15.0,
        approver_key: ApproverKey | None = None,
        agents: Sequence[Agent[Any]] = (),
    ) -> None:
        hand_over_at_exit()  # a client of one's own too: see ``hand_over_at_exit``
        self.temporal = client
        self.agents = {member.name: member for agent in agents for member in agent.everyone()}
        self.task_queue = task_queue
        self.query_timeout = query_timeout
        self.approver_key = approver_key

    def session(self, session_id: str) -> SessionHandle:
        """One session, by its id (nothing is asked of the server yet)."""
        return SessionHandle(self._connection(), session_id)

    @property
    def schedules(self) -> Schedules:
        from .schedules import Schedules  # loaded by the programs that use it

        return Schedules(self._connection())

    @property
    def versions(self) -> Versions:
        from .versions import Versions  # loaded by the programs that use it

        return Versions(self._connection())

    @property
    def evals(self) -> Evals:
        from .evals import Evals  # loaded by the programs that use it

        return Evals(self._connection())

    def _connection(self) -> Connection:
        return Connection(self.temporal, self.task_queue, self.query_timeout, self.approver_key)

    @classmethod
    async def connect(
        cls, settings: ServerSettings | None = None, *, task_queue: str | None = None
    ) -> AgentClient:
        """A client of the Temporal server ``settings`` name: by default, as the CLI's,
        ``$TEMPORAL_ADDRESS`` (else 127.0.0.1:7233) and the task queue
        ``$DURABLE_AGENT_TASK_QUEUE`` (else ``durable-agent``)."""
        if settings is None:
            settings = ServerSettings(address=os.environ.get("TEMPORAL_ADDRESS", DEFAULT_ADDRESS))
        queue = task_queue or os.environ.get("DURABLE_AGENT_TASK_QUEUE", DEFAULT_TASK_QUEUE)
        return cls(await connect_client(settings), task_queue=queue)

    # --- starting sessions ------------------------------------------------------------

    async def start(
        self,
        spec: SpecLike,
        message: str | UserMessage | None = None,
        *,
        session_id: str | None = None,
        history: Sequence[Message] = (),
        owner: str | None = None,
        restart: bool = False,
        resume: bool = False,
        one_reply: bool = False,
    ) -> str:
        """Start a session of ``spec`` (an ``Agent``, or a spec) and return its id (the
        workflow id); ``one_reply``: it ends after its answer, rather than waiting for
        the next message (a conversation); ``owner``: who it
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
            spec=parse_spec(spec, one_reply=one_reply),
            message=message,
            history=inline,
            earlier=len(earlier),
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
                WORKFLOW_NAME,
                request,
                id=session_id,
                task_queue=self.task_queue,
                start_signal=EARLIER_HISTORY_SIGNAL if earlier else None,
                start_signal_args=[earlier] if earlier else [],
                memo={key: value for key, value in memo.items() if value} or None,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE
                if restart or resumed
                else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
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
            raise translated(session_id, error) from None
        if ended is None:
            return request, owner, False
        return request.model_copy(update={"resume": ended.resume}), ended.owner or owner, True

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
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE
            if again
            else WorkflowIDReusePolicy.REJECT_DUPLICATE,
            memo={"owner": owner} if owner else None,
        )
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
            raise translated(session_id, error) from None
        return result

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
        them, as in any session. ``NoWorkerError`` when no worker polls the task queue
        within ``query_timeout`` seconds: the session stays running and goes on when
        one does (``session(id).output(agent)`` waits for it again)."""
        if isinstance(agent, str):
            found = self.agents.get(agent)
            if found is None:
                listed = ", ".join(sorted(self.agents)) or "none: give AgentClient(agents=...)"
                raise LookupError(f"no agent {agent!r} on this client (agents: {listed})")
            agent = found
        started = await self.start(agent.spec(one_reply=True), message, session_id=session_id)
        return agent.output_of(started, await self.session(started).result())

    async def sessions(self, *, limit: int = 50, where: str = "") -> list[SessionSummary]:
        """Sessions on this server, newest first (Temporal visibility; ``where``: more
        of its list filter, as ``TemporalScheduledById = "nightly"``)."""
        return await list_sessions(self.temporal, limit=limit, where=where)

    async def diff(self, left: str, right: str) -> BranchDiff:
        """Where two sessions' conversations part (a fork and its parent, or two forks):
        how many messages they share, and what each has after them."""
        one, other = await self.session(left).messages(), await self.session(right).messages()
        return diff_branches(one, other)
