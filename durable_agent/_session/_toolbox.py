"""The session's tools: those the workers described at start, those added from MCP
servers, OpenAPI documents and sub-agents, and those of the agent answering now."""

from __future__ import annotations

import difflib

from durable_agent._contracts._contracts import ResolvedTool, ResolveToolsResult
from durable_agent._spec._spec import AgentSpec
from durable_agent._spec._tool_policy import ToolPolicy
from durable_agent._spec.tool_kinds._targets import SubAgentTarget
from durable_agent._wire._tool_definition import ToolDefinition

from ._loop_rules import apply_overrides
from ._swarm import Swarm

SUB_AGENT_PARAMETERS = {
    "type": "object",
    "properties": {"task": {"type": "string", "description": "What the agent is to do"}},
    "required": ["task"],
}


class Toolbox:
    """Keeps its slice of the session state, the resolved tools (carried across
    continue-as-new), and answers by name."""

    def __init__(self, spec: AgentSpec, tools: list[ResolvedTool], swarm: Swarm | None) -> None:
        self.spec = spec
        self._carried = tools
        self.swarm = swarm
        self.tools: dict[str, ResolvedTool] = {t.definition.name: t for t in tools}
        """The tools every agent has (a one-agent session's tools)."""

    @property
    def active(self) -> dict[str, ResolvedTool]:
        """The tools of the agent answering now."""
        return self.tools if self.swarm is None else self.swarm.tools(self.tools)

    def resolved(self, result: ResolveToolsResult) -> str | None:
        """Record the tools as workers described them; why the session cannot start, if
        it cannot."""
        if result.missing:
            return unknown_tools(result.missing, result.available)
        if result.missing_guardrails:
            lacking = ", ".join(result.missing_guardrails)
            return f"spec.guardrails names guardrails that no worker has loaded: {lacking}"
        if result.missing_hooks:
            lacking = ", ".join(result.missing_hooks)
            return f"spec.approvals names predicates or notifiers no worker has loaded: {lacking}"
        self.tools = apply_overrides(self.spec.tools, self.spec.tool_execution, result.tools)
        self._carried[:] = self.tools.values()
        if self.swarm is not None:
            self.swarm.own_tools_resolved(result.tools)
        return None

    def added(self, tools: list[ResolvedTool]) -> str | None:
        """Add tools from MCP servers, OpenAPI documents or sub-agents; why the session
        cannot start, if it cannot."""
        taken = set(self.tools)
        if self.swarm is not None:
            taken |= self.swarm.handoff_names()
            taken |= self.swarm.own_tool_names()
        clash = sorted({t.definition.name for t in tools} & taken)
        names = [t.definition.name for t in tools]
        clash += sorted({n for n in names if names.count(n) > 1})
        if clash:
            return (
                f"two tools are named {clash[0]!r}: set a prefix on the MCP server or "
                "OpenAPI document, or rename one"
            )
        self.tools.update({t.definition.name: t for t in tools})
        self._carried[:] = self.tools.values()
        return None

    def sub_agents(self) -> list[ResolvedTool]:
        """The spec's sub-agents as tools (each call a child session)."""
        return [
            ResolvedTool(
                definition=ToolDefinition(
                    name=agent.name,
                    description=agent.description,
                    parameters=agent.inputs or SUB_AGENT_PARAMETERS,
                ),
                policy=ToolPolicy(approval=agent.approval, max_attempts=1),
                target=SubAgentTarget(agent=agent.name),
            )
            for agent in self.spec.agents
        ]


def unknown_tools(missing: list[str], available: list[str]) -> str:
    """Why a spec naming tools its worker lacks cannot start: each missing name, with
    the closest one the worker has (a typo is the usual cause), and all it has."""
    named = []
    for name in missing:
        close = difflib.get_close_matches(name, available, n=1)
        named.append(f"{name} (did you mean {close[0]}?)" if close else name)
    has = ", ".join(available) if available else "no tools at all"
    return (
        f"spec.tools names tools that no worker has loaded: {', '.join(named)}; "
        f"the worker that looked has {has}"
    )
