"""Agents from the owner's Python modules: what ``--agents MODULE`` loads.

A worker that loads an agent registers what the agent carries (its model endpoint, the
MCP servers it gives whole): the module is the owner's code, so what it names is the
owner's choice. Its sessions then name those things, and a spec from anyone else can
use them only as the agent does. The CLI and the gateway load the same modules to
start an agent by its name.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from durable_agent._errors import DurableAgentError
from durable_agent._spec._spec import McpServerSpec, OpenApiSpec
from durable_agent._tools._registry import Registry
from durable_agent._tools._tool import Tool
from durable_agent.capabilities import Capabilities

from ._agent import Agent


class AgentModuleError(DurableAgentError, ValueError):
    """A module that cannot be imported, holds no agents, or names one twice."""


def load_agents(modules: Sequence[str]) -> dict[str, Agent[Any]]:
    """The agents defined at the top level of ``modules`` (and those they hand off to),
    by name; importing a module registers its ``@tool`` functions as usual."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    found: dict[str, Agent[Any]] = {}
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            raise AgentModuleError(f"cannot import agents module {name!r}: {error}") from None
        agents = [v for v in vars(module).values() if isinstance(v, Agent)]
        if not agents:
            raise AgentModuleError(f"module {name!r} defines no Agent at its top level")
        for agent in agents:
            for member in agent.everyone():
                known = found.setdefault(member.name, member)
                if known is not member:
                    raise AgentModuleError(f"two different agents are named {member.name!r}")
    return found


def with_agents(capabilities: Capabilities, agents: Iterable[Agent[Any]]) -> Capabilities:
    """``capabilities`` and what ``agents`` carry: each model endpoint given whole
    (registered as ``agent:<name>``) and each MCP server given whole."""
    models = dict(capabilities.models)
    rules = dict(capabilities.endpoint_rules)
    servers = {s.name: s for s in capabilities.toolsets if isinstance(s, McpServerSpec)}
    for agent in {a.name: a for top in agents for a in top.everyone()}.values():
        if not isinstance(agent.model_spec.endpoint, str):
            models[f"agent:{agent.name}"] = agent.model_spec.endpoint
            # the agent is the owner's code: the request options it gives are the owner's
            rules[f"agent:{agent.name}"] = {"request_options": list(agent.model_spec.options.extra)}
        for server in agent.mcp_servers:
            if not isinstance(server, McpServerSpec):
                continue
            known = servers.setdefault(server.name, server)
            if known != server:
                raise AgentModuleError(
                    f"agent {agent.name!r}: MCP server {server.name!r} is registered "
                    "otherwise already"
                )
    others = [s for s in capabilities.toolsets if not isinstance(s, McpServerSpec)]
    toolsets: list[McpServerSpec | OpenApiSpec] = [*servers.values(), *others]
    return dataclasses.replace(capabilities, models=models, toolsets=toolsets, endpoint_rules=rules)


def agent_tools(agents: Iterable[Agent[Any]]) -> list[Tool]:
    """The ``@tool`` functions ``agents`` carry: theirs, their teams' and sub-agents'."""
    return [t for top in agents for a in top.everyone() for t in a.tools if isinstance(t, Tool)]


def with_agent_tools(registry: Registry, agents: Iterable[Agent[Any]]) -> Registry:
    """``registry`` with the ``@tool`` functions ``agents`` carry: ``registry`` itself
    when it holds them all already, else a new one (``registry`` is left as it was)."""
    tools = [t for t in agent_tools(agents) if registry.get(t.name) is not t]
    if not tools:
        return registry
    combined = Registry()
    combined.merge(registry)
    for found in tools:
        combined.add(found)
    return combined
