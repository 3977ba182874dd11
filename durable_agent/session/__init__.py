"""The session's pure core: every rule of the turn loop, without Temporal.

``Session`` (in ``core``) is the single decision point; it is made of collaborators with
one job each: the tool batch (``batch``: slots, the gate, run groups, results), people's
decisions (``decisions``), budgets (``budget``), rescue of unusable replies (``rescue``)
and the swarm (``swarm``). ``state`` is what continue-as-new carries; ``commands`` is
what the Session asks the workflow to do. Nothing here imports temporalio, reads a
clock or does I/O: times are given, so the same events give the same commands.
"""

from ._approvals import Approvals
from ._batch import PAGE_BREAK
from ._commands import (
    AwaitApprovals,
    CallModel,
    CheckApprovals,
    CheckGuardrails,
    ContinueAsNew,
    DescribeCalls,
    Finish,
    NotifyEscalation,
    Pause,
    RunTools,
    Summarise,
    ToolRun,
    VerifyTokens,
    WaitForMessage,
)
from ._core import Session
from ._gate import RECORDED_DECISIONS
from ._loop_rules import backoff, epoch_ms, setup_digest, tool_retry_delay
from ._rescue import truncated_reason
from ._state import SessionState
from ._tool_results import call_summary, tool_error_result
from ._views import Purpose

__all__ = [
    "PAGE_BREAK",
    "RECORDED_DECISIONS",
    "Approvals",
    "AwaitApprovals",
    "CallModel",
    "CheckApprovals",
    "CheckGuardrails",
    "ContinueAsNew",
    "DescribeCalls",
    "Finish",
    "NotifyEscalation",
    "Pause",
    "Purpose",
    "RunTools",
    "Session",
    "SessionState",
    "Summarise",
    "ToolRun",
    "VerifyTokens",
    "WaitForMessage",
    "backoff",
    "call_summary",
    "epoch_ms",
    "setup_digest",
    "tool_error_result",
    "tool_retry_delay",
    "truncated_reason",
]
