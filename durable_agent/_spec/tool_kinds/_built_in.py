"""The built-in kinds, as every session knows them."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from durable_agent._spec.tool_kinds._base import CallTarget, OtherTarget, ToolTarget
from durable_agent._spec.tool_kinds._function import FunctionKind
from durable_agent._spec.tool_kinds._handoff import HandoffKind
from durable_agent._spec.tool_kinds._kind import ToolKind
from durable_agent._spec.tool_kinds._mcp import McpKind
from durable_agent._spec.tool_kinds._openapi import OpenApiKind
from durable_agent._spec.tool_kinds._sub_agent import SubAgentKind

BUILT_IN_KINDS: Mapping[str, ToolKind[Any, Any]] = MappingProxyType(
    {
        kind.name: kind
        for kind in (FunctionKind(), McpKind(), OpenApiKind(), SubAgentKind(), HandoffKind())
    }
)
"""The kinds every session knows, by name (read-only). Their pure halves: the MCP and
OpenAPI kinds run on a worker through its ``Registry``'s own halves."""


class _OnAWorker(ToolKind[ToolTarget, CallTarget]):
    """Any kind not built in, as the session sees it: its calls run on a worker, and a
    call carries the recorded target as it is."""

    name = "(a worker's own kind)"
    target = OtherTarget


_ON_A_WORKER = _OnAWorker()


def session_kind(name: str) -> ToolKind[Any, Any]:
    """The kind the session carries a call of ``name`` out as: a built-in one, or a kind
    whose calls run on a worker (which has it, or refuses the call)."""
    return BUILT_IN_KINDS.get(name, _ON_A_WORKER)
