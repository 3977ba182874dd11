"""Tool kinds: how a tool is found, recorded and run, one module per kind.

A kind is a ``ToolKind`` with its target models; ``register_tool_kind`` makes it known
(``docs/extending.md`` builds one). The built-in kinds are registered here, one line
each.
"""

from durable_agent.tool_kinds.base import (
    CallTarget,
    FunctionTarget,
    Placement,
    ResolvedTool,
    ToolKind,
    ToolTarget,
    UnknownToolKind,
    WorkerSide,
    register_tool_kind,
    registered_kinds,
    tool_kind,
)
from durable_agent.tool_kinds.function import FunctionKind
from durable_agent.tool_kinds.handoff import HandoffKind, HandoffTarget
from durable_agent.tool_kinds.mcp import McpCall, McpKind, McpTarget
from durable_agent.tool_kinds.openapi import HttpCall, HttpOperation, OpenApiKind
from durable_agent.tool_kinds.sub_agent import SubAgentCall, SubAgentKind, SubAgentTarget

register_tool_kind(FunctionKind())
register_tool_kind(McpKind())
register_tool_kind(OpenApiKind())
register_tool_kind(SubAgentKind())
register_tool_kind(HandoffKind())

__all__ = [
    "CallTarget",
    "FunctionTarget",
    "HandoffTarget",
    "HttpCall",
    "HttpOperation",
    "McpCall",
    "McpTarget",
    "Placement",
    "ResolvedTool",
    "SubAgentCall",
    "SubAgentTarget",
    "ToolKind",
    "ToolTarget",
    "UnknownToolKind",
    "WorkerSide",
    "register_tool_kind",
    "registered_kinds",
    "tool_kind",
]
