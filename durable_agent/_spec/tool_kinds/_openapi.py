"""The OpenAPI kind: an operation of an HTTP service (a ``toolsets`` entry of kind
``openapi``), one tool per ``operationId``. The document is read once, when the
session starts (``durable_agent._tools._openapi_document`` turns it into tools); a call carries the
operation and the service's header variables, and the worker finds the operation in
the registered service's document again before it sends anything. The worker side (httpx) is
``durable_agent._tools._openapi``."""

from __future__ import annotations

from durable_agent._failures import Failure
from durable_agent._spec._spec import AgentSpec, OpenApiSpec, ToolSource
from durable_agent._spec.tool_kinds._kind import ToolKind
from durable_agent._spec.tool_kinds._targets import HttpCall, HttpOperation


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
