"""Agents written in Python: an ``Agent`` with its tools and output type, and agents loaded
from the owner's modules."""

from __future__ import annotations

from durable_agent.core import AgentRunError

from ._agent import Agent, OutputT, RunResult
from ._modules import AgentModuleError, agent_tools, load_agents, with_agent_tools, with_agents

__all__ = [
    "Agent",
    "AgentModuleError",
    "AgentRunError",
    "OutputT",
    "RunResult",
    "agent_tools",
    "load_agents",
    "with_agent_tools",
    "with_agents",
]
