"""Tool kinds: how a tool is found, recorded and run, one module per kind.

A kind is a ``ToolKind`` with its target models. The built-in kinds are
``BUILT_IN_KINDS``; a worker runs the kinds its ``Registry`` holds
(``docs/how-to/extending.md`` builds one).
"""

from ._base import (
    CallTarget,
    FunctionTarget,
    OtherTarget,
    Placement,
    ToolKind,
    ToolsetError,
    ToolTarget,
    UnknownToolKind,
    WorkerSide,
)
from ._function import FunctionKind
from ._handoff import HandoffKind, HandoffTarget
from ._mcp import McpCall, McpKind, McpTarget
from ._openapi import HttpCall, HttpOperation, OpenApiKind
from ._recorded import (
    BUILT_IN_KINDS,
    RecordedCall,
    RecordedTarget,
    ResolvedTool,
    session_kind,
)
from ._sub_agent import Refused, SubAgentCall, SubAgentKind, SubAgentTarget, child_message

__all__ = [
    "BUILT_IN_KINDS",
    "CallTarget",
    "FunctionKind",
    "FunctionTarget",
    "HandoffKind",
    "HandoffTarget",
    "HttpCall",
    "HttpOperation",
    "McpCall",
    "McpKind",
    "McpTarget",
    "OpenApiKind",
    "OtherTarget",
    "Placement",
    "RecordedCall",
    "RecordedTarget",
    "Refused",
    "ResolvedTool",
    "SubAgentCall",
    "SubAgentKind",
    "SubAgentTarget",
    "ToolKind",
    "ToolTarget",
    "ToolsetError",
    "UnknownToolKind",
    "WorkerSide",
    "child_message",
    "session_kind",
]
