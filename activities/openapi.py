"""The OpenAPI kind's worker half: reading a document when a session starts, and one
HTTP request per tool call (through httpx). Non-2xx answers are error results the model
can read.

Where a call may go is decided here at every call. The call's input says which spec
entry it belongs to; what that entry stands for (the base URL, the header variables) is
looked up in the worker's registries again, never taken from the input, since an input
can be written by anyone who can start a workflow. A registered service's calls must go
to the service's own origin (its base URL, or the one its document names)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from durable_agent.capabilities import NotAllowed
from durable_agent.capabilities.urls import origin
from durable_agent.contracts import ResolvedTool
from durable_agent.openapi import OpenApiError, base_url_of, operation_tools
from durable_agent.spec import OpenApiSpec
from durable_agent.tool_kinds import HttpCall, WorkerSide
from durable_agent.tool_kinds.openapi import OpenApiKind
from durable_agent.tools import ToolContext


async def read_document(api: OpenApiSpec) -> Any:
    """The document as JSON data (JSON or YAML, from a URL or a file)."""
    if api.document is None:
        raise OpenApiError(f"OpenAPI service {api.name!r} names no document")
    try:
        if "://" in api.document:
            async with httpx.AsyncClient(
                timeout=api.timeout_seconds, follow_redirects=False
            ) as client:
                response = await client.get(api.document, headers=_headers(api.headers))
                response.raise_for_status()
                text = response.text
        else:
            text = Path(api.document).read_text()
    except (httpx.HTTPError, OSError) as error:
        raise OpenApiError(f"cannot read {api.document}: {type(error).__name__}: {error}") from None
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml  # the openapi extra (YAML documents)
    except ImportError:
        raise OpenApiError(f"{api.document} is not JSON (YAML needs PyYAML)") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise OpenApiError(f"{api.document} does not parse: {error}") from None


async def list_api_tools(api: OpenApiSpec) -> list[ResolvedTool]:
    return operation_tools(await read_document(api), api)


def _headers(names: dict[str, str]) -> dict[str, str]:
    return {header: os.environ.get(var, "") for header, var in names.items()}


async def call_operation(
    call: HttpCall, header_variables: dict[str, str], arguments: dict[str, Any]
) -> tuple[str, bool]:
    """The answer's body, and whether it was an error (non-2xx, with the status).
    ``header_variables``: the service's headers as the worker registered them (a
    redirect is answered as it is, never followed)."""
    operation = call.operation
    url = operation.url
    for name in operation.path:
        if name not in arguments:
            return f"missing path parameter {name!r}", True
        url = url.replace(f"{{{name}}}", quote(str(arguments[name]), safe=""))
    query = {n: arguments[n] for n in operation.query if arguments.get(n) is not None}
    headers = _headers(header_variables)
    headers.update({n: str(arguments[n]) for n in operation.header if n in arguments})
    body = arguments.get("body") if operation.body else None
    async with httpx.AsyncClient(timeout=call.timeout_seconds, follow_redirects=False) as client:
        response = await client.request(
            operation.method, url, params=query, headers=headers,
            json=body if operation.body and body is not None else None,
        )  # fmt: skip
    kind = response.headers.get("content-type", "").split(";")[0].strip()
    textual = not kind or kind.startswith("text/") or "json" in kind or "xml" in kind
    body_text = response.text if textual else f"[{kind}, {len(response.content)} bytes, not shown]"
    if response.is_success:
        return body_text, False
    return f"HTTP {response.status_code} {response.reason_phrase}: {body_text}", True


class OpenApiRunner(OpenApiKind):
    """The OpenAPI kind, with what only a worker does."""

    async def run(
        self, call: HttpCall, arguments: dict[str, Any], context: ToolContext, worker: WorkerSide
    ) -> tuple[str, bool]:
        return await call_operation(call, await self.headers(call, worker), arguments)

    async def headers(self, call: HttpCall, worker: WorkerSide) -> dict[str, str]:
        """The header variables the call may carry; ``NotAllowed`` or ``NotRegistered``
        when the worker does not let it go."""
        capabilities = worker.capabilities
        url, name = call.operation.url, call.operation.api
        registered = capabilities.registered_service(name)
        if registered is None:
            if not capabilities.policy.inline_openapi:
                raise NotAllowed(f"OpenAPI service {name!r} is not registered on this worker")
            await capabilities.check_url(url)
            return call.headers
        expected = await _origin(registered, worker)
        if origin(url) != expected:
            raise NotAllowed(
                f"{url} is not at {expected}, where the registered service {name!r} lives"
            )
        return dict(registered.headers)


async def _origin(service: OpenApiSpec, worker: WorkerSide) -> str:
    """The registered service's origin (its document read once per worker when it gives
    no base URL)."""
    key = f"openapi-origin:{service.name}"
    known = worker.memo.get(key)
    if known is None:
        base = service.base_url or base_url_of(await read_document(service), service)
        known = worker.memo[key] = origin(base)
    return str(known)
