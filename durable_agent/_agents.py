"""Agents written in Python: ``Agent`` (instructions, a model, tools as functions and a
typed output) and ``RunResult``, what a run of one returns.

``Agent`` compiles to the same ``AgentSpec`` a JSON spec is, so the CLI, the gateway and
the ``temporal`` CLI see one contract. Agents loaded from the owner's modules
(``--agents MODULE``) are ``durable_agent.temporal._plugin``'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from durable_agent._contracts.boundary import AgentResult, AgentRunError
from durable_agent._spec.document import AgentSpec, McpServerSpec, ModelSpec
from durable_agent._tools.functions import Tool
from durable_agent._wire.messages import Message

# An agent and its typed output. ``output_type`` is anything pydantic validates (a model, a
# dataclass, ``list[int]``): its JSON Schema goes on the wire as each API asks for
# structured output, the answer is checked against it in the workflow (an answer that does
# not match is corrected and asked again, durably, by the session's rescue), and
# ``RunResult.output`` is an instance of the type.

OutputT = TypeVar("OutputT")


@dataclass(frozen=True)
class RunResult(Generic[OutputT]):
    """A finished run: the typed ``output``, and the session's own ``result``.
    ``messages``: the conversation after the instructions, for a run inside your own
    workflow (``durable_agent.temporal.run_agent``), to go on from in a next run; the
    whole array for ``durable_agent.testing.run_in_process``; a session keeps its own
    (``SessionHandle.messages``)."""

    session_id: str
    output: OutputT
    result: AgentResult
    messages: Sequence[Message] = ()


@dataclass(frozen=True)
class Agent(Generic[OutputT]):
    """An agent. ``tools``: ``@tool`` functions (or tool names) the worker has;
    ``mcp_servers``: MCP servers whose tools it uses (a server given whole is
    registered on the worker that loads this agent; the session names it);
    ``handoffs``: agents it may hand the conversation to (the session becomes a swarm,
    this agent first); ``sub_agents``: agents it may call as tools (each call a child
    session given the call's task, whose answer is the result); ``output_type``: the
    answer's type (``str``, the default, is the plain text); ``settings``: any other
    field of the spec (``stop``, ``session``, ``approvals``, ``rescue``,
    ``guardrails``, ...), as the JSON spec writes it."""

    name: str
    model: ModelSpec | str
    """The model (or ``"ENDPOINT:MODEL"``, as ``"openai:gpt-4o-mini"``: the model on an
    endpoint the worker registered)."""
    instructions: str | None = None
    tools: Sequence[Tool | str] = ()
    output_type: type[OutputT] | Any = str
    settings: dict[str, Any] = field(default_factory=dict)
    mcp_servers: Sequence[McpServerSpec | str] = ()
    handoffs: Sequence[Agent[Any]] = ()
    sub_agents: Sequence[Agent[Any]] = ()
    description: str = ""
    """What the agent does: how another agent's handoff or sub-agent tool describes it."""

    def __post_init__(self) -> None:
        if isinstance(self.model, str):  # one type from here on
            object.__setattr__(self, "model", ModelSpec.model_validate(self.model))

    @property
    def model_spec(self) -> ModelSpec:
        """``model`` as a ``ModelSpec`` (text was read when the agent was made)."""
        assert isinstance(self.model, ModelSpec)
        return self.model

    def team(self) -> list[Agent[Any]]:
        """This agent and every agent its handoffs reach, each once, this one first."""
        found: dict[str, Agent[Any]] = {}
        waiting: list[Agent[Any]] = [self]
        while waiting:
            agent = waiting.pop(0)
            known = found.get(agent.name)
            if known is None:
                found[agent.name] = agent
                waiting += agent.handoffs
            elif known is not agent:
                raise ValueError(f"two different agents are named {agent.name!r}")
        return list(found.values())

    def everyone(self) -> list[Agent[Any]]:
        """Its team and every agent they may call as tools, theirs too, each once."""
        found: dict[str, Agent[Any]] = {}
        waiting: list[Agent[Any]] = [self]
        while waiting:
            for member in waiting.pop(0).team():
                known = found.setdefault(member.name, member)
                if known is not member:
                    raise ValueError(f"two different agents are named {member.name!r}")
                if known is member and member.sub_agents:
                    waiting += [s for s in member.sub_agents if s.name not in found]
        return list(found.values())

    def output_schema(self) -> dict[str, Any] | None:
        """The JSON Schema the answer must match (``None`` for plain text)."""
        if self.output_type is str:
            return None
        schema: dict[str, Any] = TypeAdapter(self.output_type).json_schema()
        return schema

    def spec(self, *, one_reply: bool = False) -> AgentSpec:
        """This agent as the session's spec; ``one_reply``: the session ends after its
        answer (a run), rather than waiting for the next message (a conversation)."""
        fields: dict[str, Any] = {
            **self.settings,
            "model": self.model,
            "output_schema": self.output_schema(),
        }
        team = self.team()
        servers = {_server_name(s) for a in team for s in a.mcp_servers}
        if servers:  # by name: what they run is the worker's, registered from the agents
            named = [{"kind": "mcp", "name": name} for name in sorted(servers)]
            fields["toolsets"] = [*fields.get("toolsets", []), *named]
        subs = {s.name: s for a in team for s in a.sub_agents}
        if subs:
            fields["agents"] = [
                {
                    "name": s.name,
                    "description": s.description or f"the {s.name} agent",
                    "spec": s.spec(one_reply=True).model_dump(mode="json"),
                }
                for s in subs.values()
            ]
        if len(team) == 1:
            fields |= {"instructions": self.instructions, "tools": _tool_names(self.tools)}
        else:
            fields["swarm"] = {
                "default_agent": self.name,
                "agents": [
                    {
                        "name": a.name,
                        "description": a.description,
                        "instructions": a.instructions,
                        "model": None if a.model == self.model else a.model,
                        "tools": _tool_names(a.tools),
                        "handoffs": [h.name for h in a.handoffs],
                    }
                    for a in team
                ],
            }
        spec = AgentSpec.model_validate(fields)
        if not one_reply:
            return spec
        session = spec.session.model_copy(update={"end_after_reply": True})
        return spec.model_copy(update={"session": session})

    def output_of(self, session_id: str, result: AgentResult) -> RunResult[OutputT]:
        """The typed answer of a finished session; ``AgentRunError`` when it has none."""
        if result.status != "done" or result.final is None:
            raise AgentRunError(session_id, result)
        if self.output_type is str:
            value: Any = result.final.content
        else:
            try:
                value = TypeAdapter(self.output_type).validate_python(result.structured_output)
            except ValidationError as error:  # the schema let through what the type refuses
                raise AgentRunError(
                    session_id, result.model_copy(update={"error": str(error)})
                ) from None
        return RunResult(session_id=session_id, output=value, result=result)


def _tool_names(tools: Sequence[Tool | str]) -> list[dict[str, str]]:
    return [{"name": t if isinstance(t, str) else t.name} for t in tools]


def _server_name(server: McpServerSpec | str) -> str:
    return server if isinstance(server, str) else server.name
