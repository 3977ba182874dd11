"""The targets of the built-in kinds, and tools as a session records them.

A recorded target is read back by its ``kind`` field: as the built-in kind's own model,
or, for any other kind, as an ``OtherTarget`` that keeps every field (the session and
the client need nothing more; the worker whose ``Registry`` has the kind reads it as
the kind's model before a call runs). So a session's state reads the same on every
process, whatever kinds each has.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    Field,
    SerializeAsAny,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    model_validator,
)

from durable_agent._spec._spec import AgentSpec, McpServerSpec
from durable_agent._spec._tool_policy import OwnerGates, ToolPolicy
from durable_agent._spec.tool_kinds._base import CallTarget, FunctionTarget, OtherTarget, ToolTarget
from durable_agent._spec.tool_kinds._legacy import legacy_resolved_tool
from durable_agent._wire._contract import Contract
from durable_agent._wire._tool_definition import ToolDefinition


class McpTarget(ToolTarget):
    """Where an MCP tool lives: the spec's server, and the tool's own name there."""

    kind: Literal["mcp"] = "mcp"
    server: str
    tool: str


class McpCall(CallTarget):
    """An MCP tool call's server (its spec entry: small, and the worker needs it)."""

    kind: Literal["mcp"] = "mcp"
    server: McpServerSpec
    tool: str


class HttpOperation(ToolTarget):
    """How an OpenAPI operation is called: where each argument goes."""

    kind: Literal["openapi"] = "openapi"
    api: str
    """The service: the name of the spec's ``openapi`` entry."""
    method: str
    url: str
    """The full URL template (base URL and path), ``{name}`` for path parameters."""
    path: list[str] = Field(default_factory=list)
    query: list[str] = Field(default_factory=list)
    header: list[str] = Field(default_factory=list)
    body: bool = False
    """The ``body`` argument is sent as JSON."""
    operation_id: str | None = None
    """The operation's ``operationId`` in the document (the tool's name less the prefix
    the spec chose)."""


class HttpCall(CallTarget):
    """An OpenAPI tool call: the operation, the service's headers (variable names) and
    the operations the session's entry narrows the service to."""

    kind: Literal["openapi"] = "openapi"
    operation: HttpOperation
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float = 60.0
    operations: list[str] | None = None


class SubAgentTarget(ToolTarget):
    kind: Literal["agent"] = "agent"
    agent: str
    """The spec's ``agents`` entry."""


class SubAgentCall(CallTarget):
    kind: Literal["agent"] = "agent"
    spec: AgentSpec
    """The child session's spec."""
    inputs: dict[str, Any] | None = None
    """The agent's input schema (unset: a ``task`` string)."""


class HandoffTarget(ToolTarget):
    kind: Literal["handoff"] = "handoff"
    to: str | None = None
    """The agent the conversation goes to; ``None``: back to the previous one."""


#: The built-in kinds' recorded targets and call targets, by kind.
_TARGETS: dict[str, type[ToolTarget]] = {
    "function": FunctionTarget,
    "mcp": McpTarget,
    "openapi": HttpOperation,
    "agent": SubAgentTarget,
    "handoff": HandoffTarget,
}
_CALLS: dict[str, type[CallTarget]] = {"mcp": McpCall, "openapi": HttpCall, "agent": SubAgentCall}


def _kind_of(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    if not isinstance(kind, str):
        raise ValueError("a tool target needs its 'kind'")
    return kind


def _as_its_target(value: Any, handler: ValidatorFunctionWrapHandler) -> ToolTarget:
    if isinstance(value, ToolTarget):
        return value
    return _TARGETS.get(_kind_of(value), OtherTarget).model_validate(value)


def _as_its_call(value: Any, handler: ValidatorFunctionWrapHandler) -> CallTarget:
    if isinstance(value, CallTarget):
        return value
    kind = _kind_of(value)
    return (_CALLS.get(kind) or _TARGETS.get(kind, OtherTarget)).model_validate(value)


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
    """What the tool stands for, by its kind (``durable_agent._spec.tool_kinds``)."""
    describes: bool = False
    """The tool describes its calls for the people who approve them (``describe``)."""
    floor: OwnerGates | None = None
    """How the worker's owner gates the tool, when it does: no session setting or rule
    makes it looser."""

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        return legacy_resolved_tool(data)
