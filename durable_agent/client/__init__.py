"""Talking to sessions from any process: ``AgentClient``, each session's
``SessionHandle``, and what they answer with."""

from __future__ import annotations

from ._client import AgentClient
from ._evals import Evals
from ._schedules import OVERLAPS, Schedules, ScheduleSummary
from ._session import SessionHandle
from ._types import (
    DecisionRefusedError,
    MessageRefusedError,
    NoWorkerError,
    SessionChange,
    SessionClosedError,
    SessionExistsError,
    SessionFailedError,
    SessionNotFoundError,
    SessionSummary,
    SpecError,
    SpecLike,
    UnknownApprovalError,
    WaitOutcome,
    parse_spec,
)
from ._versions import Versions

__all__ = [
    "OVERLAPS",
    "AgentClient",
    "DecisionRefusedError",
    "Evals",
    "MessageRefusedError",
    "NoWorkerError",
    "ScheduleSummary",
    "Schedules",
    "SessionChange",
    "SessionClosedError",
    "SessionExistsError",
    "SessionFailedError",
    "SessionHandle",
    "SessionNotFoundError",
    "SessionSummary",
    "SpecError",
    "SpecLike",
    "UnknownApprovalError",
    "Versions",
    "WaitOutcome",
    "parse_spec",
]
