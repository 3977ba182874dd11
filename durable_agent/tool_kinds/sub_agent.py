"""The sub-agent kind: another agent of the spec (``spec.agents``) called as a tool, each
call a child session whose final answer is the result. The call carries the agent's
spec, its approval settings made at least as strict as the calling session's."""

from __future__ import annotations

from typing import Literal

from durable_agent.spec import AgentSpec
from durable_agent.tool_kinds.base import CallTarget, ToolKind, ToolTarget


class SubAgentTarget(ToolTarget):
    kind: Literal["agent"] = "agent"
    agent: str
    """The spec's ``agents`` entry."""


class SubAgentCall(CallTarget):
    kind: Literal["agent"] = "agent"
    spec: AgentSpec
    """The child session's spec."""


class SubAgentKind(ToolKind[SubAgentTarget, SubAgentCall]):
    name = "agent"
    target = SubAgentTarget
    call = SubAgentCall
    runs_in = "child_session"

    def call_target(self, target: SubAgentTarget, spec: AgentSpec) -> SubAgentCall:
        agent = next(a.spec for a in spec.agents if a.name == target.agent)
        approvals = agent.approvals.within(spec.approvals)  # never looser than the caller
        return SubAgentCall(spec=agent.model_copy(update={"approvals": approvals}))
