"""What every part of a client shares: the Temporal client and its settings, and the
listing of sessions (``AgentClient.sessions``, and the schedules' and versions' own)."""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from temporalio.client import Client, WorkflowExecution

from durable_agent._connection._versions import VERSION_FIELD
from durable_agent._contracts._approver_tokens import ApproverKey
from durable_agent._contracts._contracts import WORKFLOW_NAME
from durable_agent._payloads._encryption import CodecKeyError

from ._types import SessionSummary

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
