"""The swarm's side of a session: which agent is active, the navigation stack, each
agent's tools, and handing the conversation over (by a handoff tool or a person).

Everything it keeps is in its slice of the session state (``SwarmState``), so
continue-as-new carries it as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from durable_agent._contracts._contracts import Handoff, MoveToAgentSignal, ResolvedTool
from durable_agent._session._swarm_view import handoff_tools
from durable_agent._spec._spec import (
    HANDOFF_PREFIX,
    AgentSpec,
    ModelSpec,
    SwarmAgentSpec,
    SwarmSpec,
)
from durable_agent._spec.tool_kinds._targets import HandoffTarget
from durable_agent._wire._messages import ToolCall, ToolMessage

from ._gate import arguments_of
from ._loop_rules import apply_overrides
from ._state import SwarmState
from ._tool_results import error_result

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
