"""Tools as a session records them, and the built-in kinds that read their targets.

A recorded target is read back by its ``kind`` field: as the built-in kind's own model,
or, for any other kind, as an ``OtherTarget`` that keeps every field (the session and
the client need nothing more; the worker whose ``Registry`` has the kind reads it as
the kind's model before a call runs). So a session's state reads the same on every
process, whatever kinds each has.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any

from pydantic import (
    Field,
    SerializeAsAny,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)

from .._contract import Contract
from .._tool_definition import ToolDefinition
from .._tool_policy import OwnerFloor, ToolPolicy
from ._base import CallTarget, FunctionTarget, OtherTarget, ToolKind, ToolTarget
from ._function import FunctionKind
from ._handoff import HandoffKind
from ._legacy import legacy_resolved_tool
from ._mcp import McpKind
from ._openapi import OpenApiKind
from ._sub_agent import SubAgentKind

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


def _kind_of(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    if not isinstance(kind, str):
        raise ValueError("a tool target needs its 'kind'")
    return kind


def _as_its_target(value: Any, handler: ValidatorFunctionWrapHandler) -> ToolTarget:
    if isinstance(value, ToolTarget):
        return value
    kind = BUILT_IN_KINDS.get(_kind_of(value))
    return (OtherTarget if kind is None else kind.target).model_validate(value)


def _as_its_call(value: Any, handler: ValidatorFunctionWrapHandler) -> CallTarget:
    if isinstance(value, CallTarget):
        return value
    kind = BUILT_IN_KINDS.get(_kind_of(value))
    if kind is None:
        return OtherTarget.model_validate(value)
    return (kind.call or kind.target).model_validate(value)


RecordedTarget = Annotated[ToolTarget, SerializeAsAny(), WrapValidator(_as_its_target)]
"""A tool's target, read as its kind's model (every field of a kind not built in)."""
RecordedCall = Annotated[CallTarget, SerializeAsAny(), WrapValidator(_as_its_call)]
"""A call's target, read as its kind's call model."""


class ResolvedTool(Contract):
    """A tool as the session recorded it at start: replay never asks a worker again."""

    definition: ToolDefinition
    policy: ToolPolicy
    bind: dict[str, str] = Field(default_factory=dict)
    target: RecordedTarget = Field(default_factory=FunctionTarget)
    """What the tool stands for, by its kind (``durable_agent.core.tool_kinds``)."""
    describes: bool = False
    """The tool describes its calls for the people who approve them (``describe``)."""
    floor: OwnerFloor | None = None
    """How the worker's owner gates the tool, when it does: no session setting or rule
    makes it looser."""

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        return legacy_resolved_tool(data)
