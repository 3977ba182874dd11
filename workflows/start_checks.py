"""The checks at a run's start (admission, the tools' descriptions): on the workflow's
own worker, as local activities, for runs of ``start-checks-local``; as activities any
worker of the queue takes, for runs recorded before it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from .patches import START_CHECKS_LOCAL_PATCH, patched
    from .retries import LOST_WORK_RETRIES

T = TypeVar("T")


async def start_check(
    name: str,
    arg: Any,
    result_type: type[T],
    *,
    timeout: timedelta,
    heartbeat: timedelta,
    summary: str,
) -> T:
    """Run check ``name``: local (no task, no input in history) or, on older runs, remote
    with a heartbeat timeout."""
    if patched(START_CHECKS_LOCAL_PATCH):
        local: T = await workflow.execute_local_activity(
            name,
            arg,
            result_type=result_type,
            start_to_close_timeout=timeout,
            retry_policy=LOST_WORK_RETRIES,
            summary=summary,
        )
        return local
    remote: T = await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=timeout,
        heartbeat_timeout=heartbeat,
        retry_policy=LOST_WORK_RETRIES,
        summary=summary,
    )
    return remote
