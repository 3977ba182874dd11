"""``durable-agent mcp-serve``: the operator's agents as MCP tools (the official ``mcp``
SDK's ``MCPServer``), over stdio or streamable HTTP.

Each agent is a tool taking a ``task``. A call runs the agent as a durable session (one
reply; the session's id is in the progress messages), sends a progress notification
as the session works (each model call, each tool, each approval it waits for), and
returns the answer: the agent's typed output as structured content, or its text.
Over HTTP the gateway's guard stands in front (tokens, hosts, origins), and each
session belongs to the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from durable_agent._agents import Agent
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.boundary import AgentRunError
from durable_agent._contracts.events import (
    ApprovalRequested,
    Ended,
    LiveEvent,
    ModelStarted,
    ToolFinished,
    ToolStarted,
)

from ._guard import GatewayAccess, GuardMiddleware, Principal


def mcp_server(agents: AgentClient, named: Mapping[str, Agent[Any]]) -> MCPServer:
    """An MCP server whose tools are ``named``'s agents."""
    server: MCPServer = MCPServer(
        name="durable-agent",
        instructions="Each tool is an agent: give it a task; it runs durably to its answer.",
    )
    for name, agent in sorted(named.items()):
        server.add_tool(
            _run_agent(agents, agent),
            name=name,
            description=agent.description or f"Run the {name} agent on a task.",
            structured_output=agent.output_type is not str,
        )
    return server


def mcp_http_app(server: MCPServer, access: GatewayAccess) -> ASGIApp:
    """Streamable HTTP at ``/mcp``, behind the gateway's guard (it checks hosts and
    origins, so the SDK's own check of them stands aside)."""
    unchecked = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return GuardMiddleware(server.streamable_http_app(transport_security=unchecked), access)


def _run_agent(
    agents: AgentClient, agent: Agent[Any]
) -> Callable[[str, Context], Coroutine[Any, Any, Any]]:
    async def run(task: str, ctx: Context) -> Any:
        owner = _caller(ctx)
        session_id = await agents.start(agent.spec(one_reply=True), task, owner=owner)
        step = 0
        async for event in agents.session(session_id).follow():
            said = _progress(event)
            if said is not None:
                step += 1
                await ctx.report_progress(step, None, f"{session_id}: {said}")
            if isinstance(event, Ended):
                break
        try:
            return agent.output_of(session_id, await agents.session(session_id).result()).output
        except AgentRunError as error:
            raise ToolError(str(error)) from None

    # the SDK reads the tool's schema from these: the task in, the agent's type out
    run.__annotations__ = {"task": str, "ctx": Context, "return": agent.output_type}
    run.__doc__ = agent.description
    return run


def _progress(event: LiveEvent) -> str | None:
    """What a progress notification says of an event (``None``: nothing to say)."""
    if isinstance(event, ModelStarted):
        return f"turn {event.turn}: asking {event.model}"
    if isinstance(event, ToolStarted):
        return f"running {event.name}"
    if isinstance(event, ToolFinished):
        return f"{event.name} done"
    if isinstance(event, ApprovalRequested):
        pending = event.approval
        return f"waiting for a person to approve {pending.tool_name} ({pending.approval_id})"
    return None


def _caller(ctx: Context) -> str | None:
    """The owner the session records: the authenticated principal of an HTTP call (the
    guard put it in the request's state); ``None`` over stdio, where whoever runs the
    process is the caller."""
    request = getattr(ctx.request_context, "request", None)
    state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
    principal = state.get("principal") if isinstance(state, dict) else None
    return str(principal) if isinstance(principal, Principal) else None
