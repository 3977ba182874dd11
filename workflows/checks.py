"""Admission at a run's start: the worker checks the spec against its registries
before the session does anything, and a spec it refuses fails the session at once.

The checks at a run's start (admission, the tools' descriptions) run on the workflow's
own worker as local activities (``start_check``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.boundary import Admission, AdmissionInput
    from durable_agent._errors import Failure
    from durable_agent._spec.document import AgentSpec

    from .retries import LOST_WORK_RETRIES


# The checks at a run's start, as local activities: no task for another worker, and no
# input in history.

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


def refuse_forged_carry(carried: bool) -> None:
    """A run whose input carries state (grants verified by someone, decisions, messages)
    must be a continuation of this session's previous run; a first start with one is
    someone writing that state themselves, and fails at once."""
    forged = carried and workflow.info().continued_run_id is None
    if forged:
        raise ApplicationError(
            "invalid session input: carried state (grants, decisions, messages) is taken "
            "only from the session's own previous run, at continue-as-new",
            type=Failure.INVALID_INPUT,
            non_retryable=True,
        )


async def admit(spec: AgentSpec, carried: bool) -> Admission:
    """Fail the session, naming every refused field, unless its worker admits ``spec``
    (and, when the input ``carried`` state, this run is the session continuing as new).
    Runs for every run, a continued one too: its input could have been written by
    anyone who can start a workflow, not only by the run before. Returns what the
    worker says of itself (its payload store, its message log)."""
    admission = await start_check(
        "admit_session",
        AdmissionInput(spec=spec, carried=carried),
        Admission,
        timeout=timedelta(seconds=60),
        summary="admit_session",
    )
    if admission.refused:
        raise ApplicationError(
            "this worker does not admit the session's spec: " + "; ".join(admission.refused),
            type=Failure.NOT_ADMITTED,
            non_retryable=True,
        )
    return admission
