"""The session's tools: those the workers described at start, those added from MCP
servers, OpenAPI documents and sub-agents, and those of the agent answering now.

The swarm is here too: which agent is active, handing the conversation over, the
generated handoff tools, and the conversation as one agent sees it."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from durable_agent._contracts.boundary import (
    Handoff,
    MoveToAgentSignal,
    ResolvedTool,
    ResolveToolsResult,
)
from durable_agent._spec.document import (
    HANDOFF_PREFIX,
    TRANSFER_BACK,
    AgentSpec,
    ModelSpec,
    SwarmAgentSpec,
    SwarmSpec,
    transfer_tool_name,
)
from durable_agent._spec.tool_kinds import HandoffTarget, SubAgentTarget
from durable_agent._spec.tools import ToolPolicy
from durable_agent._wire.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)

from .gate import arguments_of, error_result
from .state import SwarmState, apply_overrides

# A swarm's pure parts: its generated handoff tools, and the conversation as one agent
# sees it.
#
# What an agent sees (the rule every wire API shares):
#
# - its own system prompt, in place of every agent's instructions in the array;
# - the shared conversation, each assistant message with its agent's ``name`` (Chat
#   Completions sends it; the Responses and Anthropic APIs have no such field);
# - its own turns as they were (tool calls, results and the reasoning rule);
# - another agent's tool-call turn as text: the calls in the assistant's words, their
#   results as one user message after it. Another agent's tools are not this agent's
#   (providers reject or misread calls of tools a request does not define), nor is
#   another model's reasoning its to resend. So pairing holds on every API whoever
#   made the calls, and the turn that handed over ends in a message from the user side.

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
    """The array as ``agent`` sees it (the rule opens this section); the input is not modified."""
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
        update={
            "content": said,
            "tool_calls": None,
            "reasoning": None,
            "reasoning_details": None,
            "provider_items": None,
        }
    )
    if not results:
        return [text]
    lines = [
        f"[{r.tool_name or 'tool'} {'failed' if r.is_error else 'returned'}: {r.content}]"
        for r in results
    ]
    return [text, UserMessage(content="\n".join(lines), mode="tool", agent_name=turn.agent_name)]


# The swarm's side of a session: which agent is active, the navigation stack, each
# agent's tools, and handing the conversation over (by a handoff tool or a person).
#
# Everything it keeps is in its slice of the session state (``SwarmState``), so
# continue-as-new carries it as it is.

#: Navigation kept for ``transfer_back``: a deeper stack drops its oldest entries.
MAX_STACK = 100


class Swarm:
    def __init__(self, spec: AgentSpec, swarm: SwarmSpec, state: SwarmState) -> None:
        self.spec = spec
        self.swarm = swarm
        self.state = state
        if state.agent is None:
            state.agent = swarm.default
        self._handoffs = {a.name: handoff_tools(swarm, a.name) for a in swarm.agents}

    @property
    def active(self) -> str:
        assert self.state.agent is not None
        return self.state.agent

    @property
    def agent(self) -> SwarmAgentSpec:
        return self.swarm.agent(self.active)

    @property
    def model(self) -> ModelSpec:
        return self.agent.model or self.spec.model

    def tool_names(self) -> list[str]:
        """Every agent's own tools, for the workers to describe once at start."""
        return [t.name for a in self.swarm.agents for t in a.tools]

    def own_tools_resolved(self, resolved: Sequence[ResolvedTool]) -> None:
        for agent in self.swarm.agents:
            mode = agent.tool_execution or self.spec.tool_execution
            own = apply_overrides(agent.tools, mode, resolved)
            self.state.agent_tools[agent.name] = list(own.values())

    def own_tool_names(self) -> set[str]:
        """The names of every agent's own tools."""
        return {t.definition.name for own in self.state.agent_tools.values() for t in own}

    @property
    def stack(self) -> list[str]:
        """Where ``transfer_back`` goes, the most recent last."""
        return self.state.agent_stack

    def tools(self, shared: dict[str, ResolvedTool]) -> dict[str, ResolvedTool]:
        """The active agent's tools: the session's shared ones, its own, its handoffs."""
        own = self.state.agent_tools.get(self.active, [])
        return {
            **shared,
            **{t.definition.name: t for t in own},
            **{t.definition.name: t for t in self._handoffs[self.active]},
        }

    def handoff_names(self) -> set[str]:
        return {t.definition.name for tools in self._handoffs.values() for t in tools}

    # --- handing over ----------------------------------------------------------------------

    def handoff_results(
        self, calls: Sequence[ToolCall], slots: Sequence[int], tools: dict[str, ResolvedTool]
    ) -> tuple[dict[int, ToolMessage], Handoff | None]:
        """The results of the batch's approved handoff calls and where the conversation
        goes (the first one wins; the rest are told so). It goes there once the batch's
        results are all in."""
        results: dict[int, ToolMessage] = {}
        target: str | None = None
        winner: Handoff | None = None
        for k in slots:
            call = calls[k]
            handoff = tools[call.function.name].target
            assert isinstance(handoff, HandoffTarget)
            if not isinstance(arguments_of(call.function.arguments), dict):
                results[k] = error_result(call, "the arguments are not a JSON object")
                continue
            to = handoff.to or self._previous()
            if target is not None:
                results[k] = error_result(
                    call, f"not done: this turn already hands the conversation to {target}"
                )
                continue
            target, winner = to, Handoff(to=handoff.to)
            results[k] = ToolMessage(
                tool_call_id=call.id,
                content=f"Transferred to {to}. The {to} agent answers from here.",
                tool_name=call.function.name,
            )
        return results, winner

    def hand_over(self, handoff: Handoff) -> None:
        """A handoff call went through: its agent answers from the next model call on."""
        if handoff.to is None:
            self.go_to(self._previous(), back=True)
        else:
            self.go_to(handoff.to)

    def unknown_handoff(self, name: str) -> str | None:
        """What a call of a handoff this agent lacks is told (``None``: not a handoff)."""
        if not name.startswith(HANDOFF_PREFIX):
            return None
        mine = sorted(t.definition.name for t in self._handoffs[self.active])
        target = name.removeprefix(f"{HANDOFF_PREFIX}to_")
        names = [a.name for a in self.swarm.agents]
        if target == self.active:
            why = f"you are the {target} agent already"
        elif target in names:
            why = f"the {self.active} agent does not hand over to {target}"
        else:
            why = f"there is no agent {target!r} (agents: {', '.join(names)})"
        return f"No handoff {name}: {why}. Handoffs you have: {', '.join(mine) or 'none'}"

    def _previous(self) -> str:
        return self.state.agent_stack[-1] if self.state.agent_stack else self.swarm.default

    def go_to(self, target: str, *, back: bool = False) -> None:
        """Make ``target`` the active agent: going back pops the stack, reaching the
        default agent empties it, any other move pushes the agent left."""
        state = self.state
        if back and state.agent_stack:
            state.agent_stack.pop()
        elif target == self.swarm.default:
            state.agent_stack.clear()
        else:
            state.agent_stack = [*state.agent_stack, self.active][-MAX_STACK:]
        state.agent = target

    def move_rejection(self, request: MoveToAgentSignal, moving: bool) -> str | None:
        """Why a person's move cannot be made (``moving``: another move waits already)."""
        names = [a.name for a in self.swarm.agents]
        if request.agent not in names:
            return f"move_to_agent: no agent {request.agent!r} (agents: {', '.join(names)})"
        if request.agent == self.active and not moving:
            return f"move_to_agent: {request.agent} is the active agent already"
        if self.swarm.agent(request.agent).handoff_approval == "deny":
            return f"move_to_agent: handing over to {request.agent} is refused (handoff_approval)"
        return None


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
