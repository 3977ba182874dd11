"""Who retries what: Temporal retries lost work, the workflow retries failed work.

A lost worker (killed, cut off, shut down, its heartbeat gone silent) is
infrastructure. Temporal retries such an activity on another worker, with backoff,
for as long as the session allows; the attempt never counts against the tool or
the model. A failure of the tool or the model itself comes back as a non-retryable
error of a known type, and the workflow spends one of their ``max_attempts`` on it,
waiting on a durable timer before the next.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

#: Retries after a lost worker: soon, then backing off to at most five seconds apart
#: (on top of the heartbeat timeout that noticed the loss), without a count
#: (``recovery_limit_seconds`` bounds them in time when it is set).
LOST_WORK_RETRIES = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=0,
)


def give_up_after(attempt_seconds: float, recovery_limit: float | None) -> timedelta | None:
    """Schedule-to-close of one attempt: its own time plus the time it may spend being
    retried after lost workers; ``None`` (no limit) when the session sets none."""
    if recovery_limit is None:
        return None
    return timedelta(seconds=attempt_seconds + recovery_limit)


def gave_up_text(what: str, recovery_limit: float | None) -> str:
    return (
        f"{what} was retried after lost workers for {recovery_limit:g} s without completing "
        "(session.recovery_limit_seconds)"
    )
