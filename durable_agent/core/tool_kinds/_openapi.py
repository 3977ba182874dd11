"""The OpenAPI kind: an operation of an HTTP service (a ``toolsets`` entry of kind
``openapi``), one tool per ``operationId``. The document is read once, when the
session starts (``durable_agent.core._openapi`` turns it into tools); a call carries the
operation and the service's header variables, and the worker finds the operation in
the registered service's document again before it sends anything. The worker side (httpx) is
``durable_agent.tools._openapi``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .._failures import Failure
from .._spec import AgentSpec, OpenApiSpec, ToolSource
from ._base import CallTarget, ToolKind, ToolTarget


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


class OpenApiKind(ToolKind[HttpOperation, HttpCall]):
    name = "openapi"
    target = HttpOperation
    call = HttpCall
    unavailable = Failure.OPENAPI_UNUSABLE

    def call_target(self, target: HttpOperation, spec: AgentSpec) -> HttpCall:
        services = [a for a in spec.sources("openapi") if isinstance(a, OpenApiSpec)]
        api = next(a for a in services if a.name == target.api)
        return HttpCall(
            operation=target,
            headers=api.headers,
            timeout_seconds=api.timeout_seconds,
            operations=api.operations,
        )

    def where(self, call: HttpCall) -> str:
        return f"OpenAPI service {call.operation.api!r}"

    def source_name(self, source: ToolSource) -> str:
        return f"OpenAPI {source.name!r}"
