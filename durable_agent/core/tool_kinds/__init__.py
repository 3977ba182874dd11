"""Tool kinds: how a tool is found, recorded and run, one module per kind.

A kind is a ``ToolKind`` with its target models; ``register_tool_kind`` makes it known
(``docs/extending.md`` builds one). The built-in kinds are registered here, one line
each.
"""

from ._base import (
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
from ._function import FunctionKind
from ._handoff import HandoffKind, HandoffTarget
from ._mcp import McpCall, McpKind, McpTarget
from ._openapi import HttpCall, HttpOperation, OpenApiKind
from ._sub_agent import Refused, SubAgentCall, SubAgentKind, SubAgentTarget, child_message

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
    "McpKind",
    "McpTarget",
    "OpenApiKind",
    "Placement",
    "Refused",
    "ResolvedTool",
    "SubAgentCall",
    "SubAgentTarget",
    "ToolKind",
    "ToolTarget",
    "UnknownToolKind",
    "WorkerSide",
    "child_message",
    "register_tool_kind",
    "registered_kinds",
    "tool_kind",
]
