"""The MCP kind: a tool of an MCP server (a ``toolsets`` entry of kind ``mcp``).
Its tools are listed once, when the session starts; a call carries the server's entry
(which the worker checks against its registrations again) and the tool's own name
there. The worker side (the ``mcp`` SDK) is ``durable_agent._tools._mcp``."""

from __future__ import annotations

from durable_agent._failures import Failure
from durable_agent._spec._spec import AgentSpec, McpServerSpec, ToolSource
from durable_agent._spec.tool_kinds._kind import ToolKind
from durable_agent._spec.tool_kinds._targets import McpCall, McpTarget


class McpKind(ToolKind[McpTarget, McpCall]):
    name = "mcp"
    target = McpTarget
    call = McpCall
    unavailable = Failure.MCP_SERVER_UNAVAILABLE

    def call_target(self, target: McpTarget, spec: AgentSpec) -> McpCall:
        servers = [s for s in spec.sources("mcp") if isinstance(s, McpServerSpec)]
        server = next(s for s in servers if s.name == target.server)
        return McpCall(server=server, tool=target.tool)

    def source_name(self, source: ToolSource) -> str:
        return f"MCP server {source.name!r}"

    def where(self, call: McpCall) -> str:
        return f"MCP server {call.server.name!r}"
