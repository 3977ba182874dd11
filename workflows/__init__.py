"""Deterministic orchestration only, no I/O, clock, randomness or threads: the session
workflow, which carries out the Session's commands with Temporal's primitives, and the
workflows beside it (evaluations, the shared endpoint limiter).

This folder installs as ``durable_agent._workflows``: ``durable_agent._workflows.X`` is the
file ``workflows/X.py``; inside, modules import each other relatively.

Its modules:

- ``agent_workflow``: ``AgentWorkflow``: one session, carried out on Temporal.
- ``effects``: how the workflow does the Session's commands with Temporal's primitives.
- ``handlers``: signals, updates and queries: the session's entry points.
- ``starting``: a run that opens a session, and its inputs read without trust.
- ``checks``: admission at a run's start, as local activities.
- ``model_calls``: carrying out ``CallModel``.
- ``tool_calls``: carrying out ``RunTools``, and which inline run a call belongs to.
- ``approvals``: durable waits for people's decisions, and the gate's activities.
- ``transcript_sync``: keeping the workers' transcript store up to date.
- ``continuation``: continue-as-new, and the next run's input.
- ``live_feed``: the session's live event log.
- ``telemetry``: a session's metrics and log lines.
- ``retries``: who retries what.
- ``patches``: changes to workflow code, and how long older paths are kept.
- ``inline``: an agent run inside the caller's own workflow.
- ``evals``: ``EvalWorkflow``: a dataset of cases run as durable work.
- ``limiter``: ``EndpointLimiter``: one endpoint's shared limit."""

from __future__ import annotations

from .agent_workflow import AgentWorkflow
from .continuation import ContinuedInput
from .evals import EvalWorkflow
from .limiter import EndpointLimiter

__all__ = ["AgentWorkflow", "ContinuedInput", "EndpointLimiter", "EvalWorkflow"]
