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
    ToolsetError,
    ToolTarget,
    UnknownToolKind,
    WorkerSide,
)
from ._built_in import BUILT_IN_KINDS, session_kind
from ._function import FunctionKind
from ._handoff import HandoffKind
from ._kind import ToolKind
from ._mcp import McpKind
from ._openapi import OpenApiKind
from ._sub_agent import Refused, SubAgentKind, child_message
from ._targets import (
    HandoffTarget,
    HttpCall,
    HttpOperation,
    McpCall,
    McpTarget,
    RecordedCall,
    RecordedTarget,
    ResolvedTool,
    SubAgentCall,
    SubAgentTarget,
)

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
