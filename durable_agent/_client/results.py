"""What ``AgentClient`` hands back and raises: session summaries, what a watch saw,
what a wait stopped for, the errors a caller can act on, and the spec parser.
``durable_agent._client.sessions`` re-exports them all. Also what every part of a client
shares: its connection (``Connection``) and the listing of sessions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import structlog
from pydantic import ValidationError
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError

from durable_agent._agents import Agent
from durable_agent._connection import VERSION_FIELD
from durable_agent._contracts.approvals import ApproverKey, PendingApproval
from durable_agent._contracts.boundary import (
    WORKFLOW_NAME,
    AgentResult,
    AgentRunError,
    SessionStatus,
)
from durable_agent._errors import DurableAgentError, Failure
from durable_agent._payloads.encryption import CodecKeyError
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import AssistantMessage, Message, Usage


class MessageRefusedError(DurableAgentError, ValueError):
    """The session refused a message (empty, too long, the session ending)."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id!r} refused the message: {reason}")
        self.reason = reason


def refusal(session_id: str, error: WorkflowUpdateFailedError) -> MessageRefusedError:
    """Why the session refused a message sent by update (its validator's words)."""
    cause = error.cause
    reason = cause.message if isinstance(cause, ApplicationError) else str(cause or error)
    return MessageRefusedError(session_id, reason)


class SessionNotFoundError(DurableAgentError, LookupError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {session_id!r} on this server and namespace")
        self.session_id = session_id


class SessionClosedError(DurableAgentError, RuntimeError):
    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} has ended; start a new one to go on")
        self.session_id = session_id


class SessionExistsError(DurableAgentError, RuntimeError):
    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"a session with id {session_id!r} exists (running, or ended: to go on with an "
            "ended one's conversation use resume=True or --resume; restart=True or --restart "
            "starts it over)"
        )
        self.session_id = session_id


#: A worker that waits for work asks its queue again at least this often (a long poll
#: lasts about a minute): one the server last saw longer ago than this has stopped.
LIVE_POLL_SECONDS = 75.0


class NoWorkerError(DurableAgentError, RuntimeError):
    """No worker answered for the session in time (a query, or a wait for its end
    while its next step waits for a worker and none polls its queue); the session
    stays as it is until one comes. ``polled_seconds_ago``: how long ago
    each worker the server saw in the last few minutes asked the session's task queue
    for work (``None``: the server could not say), which tells a worker that never came
    or stopped from one alive and busy."""

    def __init__(
        self,
        session_id: str,
        task_queue: str,
        seconds: float,
        polled_seconds_ago: list[float] | None = None,
        *,
        ended: bool = False,
    ) -> None:
        self.session_id, self.task_queue = session_id, task_queue
        self.polled_seconds_ago = polled_seconds_ago
        start = f"(start one with `durable-agent worker --task-queue {task_queue}`)"
        queue = f"task queue {task_queue!r}"
        live = [s for s in polled_seconds_ago or [] if s <= LIVE_POLL_SECONDS]
        if polled_seconds_ago is None:
            why = f"is a worker running on {queue}? {start}"
        elif not polled_seconds_ago:
            why = f"no worker has asked {queue} for work in the last minutes {start}"
        elif not live:
            last = min(polled_seconds_ago)
            why = f"the last worker to ask {queue} for work did so {last:.0f} s ago: it stopped"
            why += f" {start}"
        else:
            workers = "1 worker asks" if len(live) == 1 else f"{len(live)} workers ask"
            why = (
                f"{workers} {queue} for work (the last {min(live):.0f} s ago), so the one "
                "holding the session is busy, its tasks queued behind others' (wait, add "
                "workers, or give queries longer: query_timeout), or it stopped within the "
                "last minute"
            )
        super().__init__(
            f"no worker answered for session {session_id!r} within {seconds:g} s: {why}. "
            + meanwhile(task_queue, ended=ended)
        )


def meanwhile(task_queue: str, *, ended: bool = False) -> str:
    """What becomes of a session while no worker serves it: every wait says it, so
    nobody takes the error for a lost session and starts it again."""
    if ended:
        return f"The session has ended; a worker polling task queue {task_queue!r} reads it."
    return (
        "The session stays running and nothing is lost: it goes on as soon as a worker "
        f"polls task queue {task_queue!r}."
    )


class SpecError(DurableAgentError, ValueError):
    """The agent spec is not valid; the text names each field and why."""

    @classmethod
    def from_validation(cls, error: ValidationError) -> SpecError:
        lines = [
            f"  {'.'.join(str(p) for p in e['loc']) or '(spec)'}: {e['msg']}"
            for e in error.errors()
        ]
        return cls("invalid agent spec:\n" + "\n".join(lines))


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    status: str
    """Temporal's execution status: RUNNING, COMPLETED, FAILED, TERMINATED, ..."""
    started_at: datetime | None
    closed_at: datetime | None
    title: str = ""
    """The session's first user words (memo ``title``)."""
    owner: str | None = None
    """Who started it (memo ``owner``), when it was started for someone."""
    forked_from: str | None = None
    """The session it branches from (``SessionHandle.fork``), and at which message."""
    forked_at: int | None = None
    schedule: str | None = None
    """The schedule that started it (``AgentClient.schedules.create``)."""
    version: str | None = None
    """The worker build running it (``DEPLOYMENT:BUILD_ID``; unset without versioning)."""


@dataclass(frozen=True)
class SessionChange:
    """What ``SessionHandle.watch`` saw change, in order.

    ``message``: a message landed in the array (``message``, at ``index``);
    ``status``: the status changed (``status``); ``approval``: a call waits for a
    person (``pending``, announced once); ``reply``: the session answered and waits
    for the next message; ``ended``: the session is over (``result``, unless it failed
    outside the loop or was terminated)."""

    kind: Literal["message", "status", "approval", "reply", "ended"]
    message: Message | None = None
    index: int | None = None
    status: SessionStatus | None = None
    pending: PendingApproval | None = None
    result: AgentResult | None = None


@dataclass(frozen=True)
class WaitOutcome:
    """What ``SessionHandle.wait`` stopped for."""

    kind: Literal["reply", "approval", "ended"]
    messages: list[Message]
    """Messages after the ``after`` index."""
    status: SessionStatus | None
    pending: list[PendingApproval]
    result: AgentResult | None = None
    """Set when the session has ended."""

    @property
    def reply(self) -> AssistantMessage | None:
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                return message
        return None


#: What starts a session: an ``Agent``, its spec, or the spec as a dict or JSON text.
SpecLike = Agent[Any] | AgentSpec | dict[str, Any] | str


def parse_spec(spec: SpecLike, *, one_reply: bool = False) -> AgentSpec:
    """An ``AgentSpec`` from an ``Agent``, a spec, a dict or JSON text; ``SpecError``
    names bad fields. ``one_reply``: the session ends after its answer."""
    if isinstance(spec, Agent):
        return spec.spec(one_reply=one_reply)
    if not isinstance(spec, AgentSpec | dict | str):
        raise SpecError(
            f"a session starts from an Agent, an AgentSpec, a dict or JSON text, not a "
            f"{type(spec).__name__}"
        )
    try:
        if isinstance(spec, AgentSpec):
            parsed = spec
        elif isinstance(spec, str):
            parsed = AgentSpec.model_validate_json(spec)
        else:
            parsed = AgentSpec.model_validate(spec)
    except ValidationError as error:
        raise SpecError.from_validation(error) from None
    if one_reply and not parsed.session.end_after_reply:
        rules = parsed.session.model_copy(update={"end_after_reply": True})
        parsed = parsed.model_copy(update={"session": rules})
    return parsed


#: What a failure of each type asks of whoever started the session.
NEXT_STEPS: dict[str, str] = {
    Failure.NOT_ADMITTED: "register what it names on the worker (its Capabilities or "
    "--capabilities file), or change the spec to name what the worker has",
    Failure.INVALID_INPUT: "fix the start's input (AgentSpec.model_validate shows the error)",
    Failure.UNKNOWN_TOOL: "load the tool's module on the worker (--tools, or the agent's tools)",
}


class SessionFailedError(AgentRunError, WorkflowFailureError):
    """The session failed before it could end with an answer: its worker refused its
    spec, its input could not be read, a tool it names is missing. The message gives
    the reason first and what to do; ``kind`` is the failure's type (``Failure``) and
    ``cause`` Temporal's own error."""

    def __init__(self, session_id: str, error: WorkflowFailureError) -> None:
        cause = error.cause
        kind = cause.type if isinstance(cause, ApplicationError) else None
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause)
        next_step = NEXT_STEPS.get(kind or "")
        text = f"{reason} (session {session_id} failed" + (f": {next_step})" if next_step else ")")
        Exception.__init__(self, text)
        self.__cause__ = cause
        self.session_id = session_id
        self.kind = kind
        self.result = AgentResult(
            status="failed",
            stop_reason="error",
            error=reason,
            turns=0,
            message_count=0,
            usage=Usage(),
        )


class DecisionRefusedError(DurableAgentError, ValueError):
    """The session refused a decision and changed nothing; the text says why."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id!r} refused: {reason}")
        self.session_id = session_id
        self.reason = reason


class UnknownApprovalError(DurableAgentError, LookupError):
    def __init__(self, session_id: str, approval_id: str, pending: Sequence[str]) -> None:
        waiting = ", ".join(pending) if pending else "none"
        super().__init__(
            f"session {session_id!r} has no call waiting under {approval_id!r} for a decision "
            f"or its output (waiting: {waiting}). Use one of the waiting ids (`durable-agent "
            f"status {session_id}` lists them). A call that a worker runs returns its own "
            "result: nobody can decide it or give its output."
        )
        self.approval_id = approval_id


# What every part of a client shares: the Temporal client and its settings, and the
# listing of sessions (``AgentClient.sessions``, and the schedules' and versions' own).

log = structlog.get_logger("durable_agent._client")


@dataclass(frozen=True)
class Connection:
    """``temporal``: the Temporal client; ``task_queue``: where sessions start;
    ``query_timeout``: seconds a read waits for a worker to answer; ``approver_key``:
    what decisions are signed with (``None``: unsigned)."""

    temporal: Client
    task_queue: str
    query_timeout: float
    approver_key: ApproverKey | None


async def list_sessions(temporal: Client, *, limit: int, where: str) -> list[SessionSummary]:
    """Sessions on the server, newest first (Temporal visibility; ``where``: more of its
    list filter)."""
    found = []
    query = f'WorkflowType = "{WORKFLOW_NAME}"' + (f" AND {where}" if where else "")
    async for execution in temporal.list_workflows(query, limit=limit):
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


def version_of(execution: WorkflowExecution) -> str | None:
    """The build running (or that last ran) this execution, ``DEPLOYMENT:BUILD_ID``."""
    found = execution.search_attributes.get(VERSION_FIELD)
    return str(found[0]) if found else None


async def _memo(execution: WorkflowExecution, key: str) -> str | None:
    """A memo value; ``None`` when absent, or when this client cannot decode it (a
    session encrypted with keys it lacks must not break a listing)."""
    try:
        found: str = await execution.memo_value(key, "", type_hint=str)
    except (KeyError, ValueError, TypeError, CodecKeyError) as error:
        log.warning("memo not readable", session_id=execution.id, memo_key=key, error=str(error))
        return None
    return found or None
