"""Deterministic orchestration only, no I/O, clock, randomness or threads: the session
workflow, which carries out the Session's commands with Temporal's primitives, and the
workflows beside it (evaluations, the shared endpoint limiter).

Installed as ``durable_agent._workflows``; inside, modules import each other relatively."""

from __future__ import annotations

from .agent_workflow import AgentWorkflow
from .continuation import ContinuedInput
from .evals import EvalWorkflow
from .limiter import EndpointLimiter

__all__ = ["AgentWorkflow", "ContinuedInput", "EndpointLimiter", "EvalWorkflow"]
