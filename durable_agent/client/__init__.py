"""Talking to sessions from any process: ``AgentClient`` and what it answers with."""

from __future__ import annotations

from ._approvals import DecisionRefusedError, UnknownApprovalError
from ._client import (
    AgentClient,
    MessageRefusedError,
    NoWorkerError,
    SessionClosedError,
    SessionExistsError,
    SessionNotFoundError,
    SpecError,
    parse_spec,
)
from ._schedules import OVERLAPS
from ._types import SessionChange, SessionSummary, WaitOutcome

__all__ = [
    "OVERLAPS",
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
