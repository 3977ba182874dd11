"""Which agent run inside someone else's workflow a call belongs to.

A session workflow is one session: its id names it, and its calls' idempotency keys
and sub-agents' ids are made from it. A workflow may run several agents inline, one
after another or side by side, each from turn 1: their calls need a name of their own
under the workflow's id, or the second run's calls would take the first's keys."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_SCOPE: ContextVar[str | None] = ContextVar("durable_agent_run_scope", default=None)


@contextmanager
def run_scope(scope: str) -> Iterator[None]:
    """Within the block (its tasks too), calls belong to the inline run ``scope``."""
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def current_run() -> str | None:
    """The inline run the calling code belongs to (``None``: the session workflow)."""
    return _SCOPE.get()
