"""The MCP kind's worker half, through the official ``mcp`` SDK: reading a server's tools when a
session starts, and one call per activity.

Stateless by design: every call connects (a stdio server is started, an HTTP server
is reached), initialises, calls and closes. A server therefore keeps nothing between
calls that the session relies on, and a worker that dies mid-call leaves nothing
behind but a call Temporal retries on another worker, which connects afresh. The
call's idempotency key travels in the request's ``_meta`` (``durable_agent/
idempotency_key``), where a server can read it to deduplicate.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from durable_agent._contracts.boundary import ResolvedTool
from durable_agent._errors import DurableAgentError, NotAllowed
from durable_agent._spec.document import McpServerSpec, ToolSource
from durable_agent._spec.tool_kinds import McpCall, McpKind, McpTarget, WorkerSide
from durable_agent._spec.tools import ToolContext, ToolPolicy
from durable_agent._wire.messages import ToolDefinition

#: Where a call's idempotency key travels, in the MCP request's ``_meta``.
IDEMPOTENCY_META = "durable_agent/idempotency_key"


class McpServerError(DurableAgentError, RuntimeError):
    """The server could not be started, reached or initialised."""


@asynccontextmanager
async def connected(server: McpServerSpec) -> AsyncIterator[Any]:
    """An initialised ``ClientSession`` with the server, closed on exit."""
    from mcp import ClientSession, StdioServerParameters  # the mcp extra
    from mcp.client.stdio import get_default_environment, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if server.command is not None:
        # what any process needs to start (the SDK's own set: PATH, HOME, ...), and the
        # variables the spec names
        env = {name: os.environ[name] for name in server.env if name in os.environ}
        params = StdioServerParameters(
            command=server.command, args=server.args, env={**get_default_environment(), **env}
        )
        transport = stdio_client(params)
    else:
        assert server.url is not None
        import httpx2  # what the mcp SDK's HTTP transport takes

        headers = {h: os.environ.get(var, "") for h, var in server.headers.items()}
        client = httpx2.AsyncClient(
            headers=headers, timeout=server.timeout_seconds, follow_redirects=False
        )
        transport = streamable_http_client(server.url, http_client=client)
    async with transport as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def list_server_tools(server: McpServerSpec) -> list[ResolvedTool]:
    """The server's tools (those ``allowed_tools`` keeps), named with its prefix."""
    try:
        async with connected(server) as session:
            listed = await session.list_tools()
    except Exception as error:
        raise McpServerError(error_reason(error)) from None
    allowed = None if server.allowed_tools is None else set(server.allowed_tools)
    tools = []
    for found in listed.tools:
        if allowed is not None and found.name not in allowed:
            continue
        schema = dict(found.input_schema or {})
        if schema.get("type") != "object":
            raise McpServerError(f"tool {found.name!r} takes {schema.get('type')!r}, not an object")
        tools.append(
            ResolvedTool(
                definition=ToolDefinition(
                    name=server.tool_prefix + found.name,
                    description=found.description or found.name,
                    parameters=schema,
                ),
                policy=ToolPolicy(
                    approval=server.approval,
                    timeout_seconds=server.timeout_seconds,
                    max_attempts=server.max_attempts,
                ),
                target=McpTarget(server=server.name, tool=found.name),
            )
        )
    missing = sorted((allowed or set()) - {_own_name(t) for t in tools})
    if missing:
        raise McpServerError(f"allowed_tools names tools it does not have: {', '.join(missing)}")
    return tools


def _own_name(tool: ResolvedTool) -> str:
    assert isinstance(tool.target, McpTarget)
    return tool.target.tool


class McpRunner(McpKind):
    """The MCP kind, with what only a worker does."""

    async def admit(self, source: ToolSource, worker: WorkerSide) -> McpServerSpec:
        """The server to start or reach for a spec's entry: the registered one by that
        name (the entry may narrow its tools, rename their prefix and add approval), or
        the entry itself where the policy lets a spec give a server whole."""
        assert isinstance(source, McpServerSpec)
        capabilities = worker.capabilities
        if not source.given_whole():
            server: McpServerSpec = capabilities.narrowed_source(source, "MCP server")
            return server
        if not capabilities.policy.gives_whole("mcp"):
            what = f"a command ({source.command!r})" if source.command else f"a URL ({source.url})"
            raise NotAllowed(
                f"MCP server {source.name!r}: a spec may not carry {what} on this worker; "
                f"name a registered server ({capabilities.registered_names('mcp')})"
            )
        if source.url is not None:
            await capabilities.check_url(source.url)
        return source

    async def tools(self, source: ToolSource, worker: WorkerSide) -> list[ResolvedTool]:
        """The server's tools; a registered server's approval is their floor."""
        listed = await list_server_tools(await self.admit(source, worker))
        floored: list[ResolvedTool] = worker.capabilities.floored(source, listed)
        return floored

    async def run(
        self, call: McpCall, arguments: dict[str, Any], context: ToolContext, worker: WorkerSide
    ) -> tuple[str, bool]:
        # the server the worker registered under that name, never the input's own, and
        # only a tool the registration (and the session's narrowing of it) allows
        server = await self.admit(call.server, worker)
        if server.allowed_tools is not None and call.tool not in server.allowed_tools:
            raise NotAllowed(
                f"MCP server {server.name!r}: tool {call.tool!r} is not among its allowed "
                f"tools ({', '.join(server.allowed_tools) or 'none'})"
            )
        return await call_server_tool(server, call.tool, arguments, context.idempotency_key)

    async def identity(self, call: McpCall, worker: WorkerSide) -> str | None:
        if call.server.given_whole():
            return None  # a server the spec carried: the owner granted it nothing
        return f"mcp:{call.server.name}/{call.tool}"


async def call_server_tool(
    server: McpServerSpec, tool: str, arguments: dict[str, Any], key: str
) -> tuple[str, bool]:
    """The call's result as text, and whether the server reported it as an error."""
    async with connected(server) as session:
        result = await session.call_tool(
            tool,
            arguments,
            read_timeout_seconds=server.timeout_seconds,
            meta={IDEMPOTENCY_META: key},
        )
    return result_text(result), bool(result.is_error)


def result_text(result: Any) -> str:
    """Text parts as they are; structured content as JSON; anything else by a marker,
    never dropped."""
    parts: list[str] = []
    for item in result.content or []:
        kind = getattr(item, "type", "unknown")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(item, 'mime_type', '')}, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(item, 'uri', '')}]")
        else:
            parts.append(f"[{kind} content, not shown]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def error_reason(error: BaseException) -> str:
    """The innermost words of an error (the SDK wraps them in exception groups)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"
