"""The session: the pure state machine that holds every rule of the turn loop.

``Session`` is the one entry point to the rules: it takes events (``_events.py``),
answers ``next_command``, and is read through its ``SessionView``; its collaborators
(the tool batch, people's decisions, approvals, budgets, rescue, the swarm) are its
own. ``carry_out`` is the one executor of its commands, through an ``Effects`` of the
caller's (the workflow's Temporal primitives, or a test's functions). ``SessionState``
is what continue-as-new carries. Nothing here imports temporalio, reads a clock or does
I/O: times are given, so the same events give the same commands.
"""

from .batch import PAGE_BREAK
from .executor import Effects, carry_out, carry_out_step
from .gate import RECORDED_DECISIONS, call_summary, tool_error_result
from .protocol import (
    AwaitApprovals,
    CallModel,
    CheckApprovals,
    CheckGuardrails,
    Command,
    ContinueAsNew,
    DescribeCalls,
    Finish,
    ModelCancelled,
    ModelFailure,
    ModelOutcome,
    ModelReply,
    NotifyEscalation,
    Pause,
    RunTools,
    Summarise,
    ToolRun,
    VerifyTokens,
    WaitForMessage,
)
from .state import SessionState, backoff, epoch_ms, setup_digest, tool_retry_delay
from .state_machine import Compatibility, Session
from .view import Purpose, SessionView

__all__ = [
    "PAGE_BREAK",
    "RECORDED_DECISIONS",
    "AwaitApprovals",
    "CallModel",
    "CheckApprovals",
    "CheckGuardrails",
    "Command",
    "Compatibility",
    "ContinueAsNew",
    "DescribeCalls",
    "Effects",
    "Finish",
    "ModelCancelled",
    "ModelFailure",
    "ModelOutcome",
    "ModelReply",
    "NotifyEscalation",
    "Pause",
    "Purpose",
    "RunTools",
    "Session",
    "SessionState",
    "SessionView",
    "Summarise",
    "ToolRun",
    "VerifyTokens",
    "WaitForMessage",
    "backoff",
    "call_summary",
    "carry_out",
    "carry_out_step",
    "epoch_ms",
    "setup_digest",
    "tool_error_result",
    "tool_retry_delay",
]
