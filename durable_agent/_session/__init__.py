"""The session: the pure state machine that holds every rule of the turn loop.

``Session`` is the one entry point to the rules: it takes events (``protocol``),
answers ``next_command``, and is read through its ``SessionView``; its collaborators
(the tool batch, people's decisions, approvals, budgets, rescue, the swarm) are its
own. ``carry_out`` is the one executor of its commands, through an ``Effects`` of the
caller's (the workflow's Temporal primitives, or a test's functions). ``SessionState``
is what continue-as-new carries. Nothing here imports temporalio, reads a clock or does
I/O: times are given, so the same events give the same commands.

Its modules:

- ``state_machine``: the Session: every rule of the turn loop.
- ``state``: ``SessionState``, what continue-as-new carries, and small rules of the loop.
- ``protocol``: the events the Session is told and the commands it answers with.
- ``executor``: ``carry_out``, the one loop that has the Session's commands done.
- ``view``: the Session as queries, the live feed and the workflow's waits read it.
- ``requests``: what people send between steps, kept for the next checkpoint.
- ``model_step``: a model call with its retries, compaction, rescue and the budget.
- ``model_call``: the request a model call sends, and how a call is delivered.
- ``batch``: the turn's tool batch, from the gate's verdicts to results in order.
- ``gate``: which calls run, are refused or wait for a person; results the loop writes.
- ``decisions``: approvals, people's decisions and standing grants.
- ``toolbox``: the session's tools, and the swarm's agents and handoffs.
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
