"""The checks at a run's start (admission, the tools' descriptions), on the workflow's
own worker as local activities: no task for another worker, and no input in history."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from .retries import LOST_WORK_RETRIES

T = TypeVar("T")


async def start_check(
    name: str, arg: Any, result_type: type[T], *, timeout: timedelta, summary: str
) -> T:
    """Run check ``name`` as a local activity."""
    result: T = await workflow.execute_local_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=timeout,
        retry_policy=LOST_WORK_RETRIES,
        summary=summary,
    )
    return result
