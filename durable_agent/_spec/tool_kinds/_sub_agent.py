"""The sub-agent kind: another agent of the spec (``spec.agents``) called as a tool, each
call a child session whose final answer is the result. The call carries the agent's
spec, its approval settings made at least as strict as the calling session's."""

from __future__ import annotations

import json
from typing import Any

from durable_agent._spec._spec import AgentSpec
from durable_agent._spec._structured_output import parse_structured_output
from durable_agent._spec.tool_kinds._kind import ToolKind
from durable_agent._spec.tool_kinds._targets import SubAgentCall, SubAgentTarget


class SubAgentKind(ToolKind[SubAgentTarget, SubAgentCall]):
    name = "agent"
    target = SubAgentTarget
    call = SubAgentCall
    runs_in = "child_session"

    def call_target(self, target: SubAgentTarget, spec: AgentSpec) -> SubAgentCall:
        entry = next(a for a in spec.agents if a.name == target.agent)
        approvals = entry.spec.approvals.within(spec.approvals)  # never looser than the caller
        child = entry.spec.model_copy(update={"approvals": approvals})
        return SubAgentCall(spec=child, inputs=entry.inputs)


def child_message(arguments: str, inputs: dict[str, Any] | None) -> str | Refused | None:
    """The child session's message from a call's arguments: its ``task``, or with
    ``inputs`` the arguments as JSON once they match the schema (``Refused``: why not,
    for the model to read; ``None``: no usable task)."""
    if inputs is not None:
        parsed = parse_structured_output(arguments or "{}", inputs)
        if not parsed.ok:
            text = (parsed.error or "").replace("the answer", "the arguments")
            return Refused(f"the agent's inputs: {text}")
        return json.dumps(parsed.value, ensure_ascii=False, indent=2, sort_keys=True)
    try:
        task = json.loads(arguments or "{}").get("task")
    except (ValueError, AttributeError):
        return None
    return task if isinstance(task, str) and task.strip() else None


class Refused(str):
    """A reason the call's arguments cannot start the agent."""
