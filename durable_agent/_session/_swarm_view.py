"""A swarm's pure parts: its generated handoff tools, and the conversation as one agent
sees it.

What an agent sees (the rule every wire API shares):

- its own system prompt, in place of every agent's instructions in the array;
- the shared conversation, each assistant message with its agent's ``name`` (Chat
  Completions sends it; the Responses and Anthropic APIs have no such field);
- its own turns as they were (tool calls, results and the reasoning rule);
- another agent's tool-call turn as text: the calls in the assistant's words, their
  results as one user message after it. Another agent's tools are not this agent's
  (providers reject or misread calls of tools a request does not define), nor is
  another model's reasoning its to resend. So pairing holds on every API whoever
  made the calls, and the turn that handed over ends in a message from the user side.
"""

from __future__ import annotations

from collections.abc import Sequence

from durable_agent._contracts._contracts import ResolvedTool
from durable_agent._spec._spec import TRANSFER_BACK, SwarmSpec, transfer_tool_name
from durable_agent._spec._tool_policy import ToolPolicy
from durable_agent._spec.tool_kinds._targets import HandoffTarget
from durable_agent._wire._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from durable_agent._wire._tool_definition import ToolDefinition

_REASON = {
    "type": "object",
    "properties": {"reason": {"type": "string", "description": "Why, for the agent taking over"}},
}


def handoff_tools(swarm: SwarmSpec, agent: str) -> list[ResolvedTool]:
    """``transfer_to_<name>`` for each agent ``agent`` may hand over to, and
    ``transfer_back`` for every agent but the default one."""
    me = swarm.agent(agent)
    targets = me.handoffs if me.handoffs is not None else [a.name for a in swarm.agents]
    tools = []
    for target in (swarm.agent(name) for name in targets if name != agent):
        about = f": {target.description}" if target.description else ""
        tools.append(
            ResolvedTool(
                definition=ToolDefinition(
                    name=transfer_tool_name(target.name),
                    description=f"Hand the conversation to the {target.name} agent{about}",
                    parameters=_REASON,
                ),
                policy=ToolPolicy(approval=target.handoff_approval, max_attempts=1),
                target=HandoffTarget(to=target.name),
            )
        )
    if agent != swarm.default:
        back = (
            "Hand the conversation back to the agent that handed it to you (the "
            f"{swarm.default} agent if none did)"
        )
        tools.append(
            ResolvedTool(
                definition=ToolDefinition(name=TRANSFER_BACK, description=back, parameters=_REASON),
                policy=ToolPolicy(max_attempts=1),
                target=HandoffTarget(to=None),
            )
        )
    return tools


def as_seen_by(messages: Sequence[Message], agent: str, instructions: str | None) -> list[Message]:
    """The array as ``agent`` sees it (see the module's rule); the input is not modified."""
    seen: list[Message] = [SystemMessage(content=instructions)] if instructions else []
    k = 0
    while k < len(messages):
        message = messages[k]
        k += 1
        if isinstance(message, SystemMessage) and message.agent_name is not None:
            continue  # an agent's prompt: only the current agent's is sent
        if not isinstance(message, AssistantMessage) or message.agent_name is None:
            seen.append(message)
            continue
        named = message.model_copy(update={"name": message.name or message.agent_name})
        if message.agent_name == agent or not message.tool_calls:
            seen.append(named)
            continue
        results: list[ToolMessage] = []
        while k < len(messages) and isinstance(messages[k], ToolMessage):
            if len(results) == len(message.tool_calls):
                break
            results.append(messages[k])  # type: ignore[arg-type]
            k += 1
        seen.extend(_as_text(named, results))
    return seen


def _as_text(turn: AssistantMessage, results: list[ToolMessage]) -> list[Message]:
    """Another agent's tool-call turn in words: what it called, then what came back."""
    calls = [
        f"[{turn.agent_name} called {call.function.name} {call.function.arguments}]"
        for call in turn.tool_calls or ()
    ]
    said = "\n".join([turn.content, *calls]) if turn.content else "\n".join(calls)
    text = turn.model_copy(
        update={"content": said, "tool_calls": None, "reasoning": None, "reasoning_details": None}
    )
    if not results:
        return [text]
    lines = [
        f"[{r.tool_name or 'tool'} {'failed' if r.is_error else 'returned'}: {r.content}]"
        for r in results
    ]
    return [text, UserMessage(content="\n".join(lines), mode="tool", agent_name=turn.agent_name)]
