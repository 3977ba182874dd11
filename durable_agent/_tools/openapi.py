"""The OpenAPI kind's worker half: reading a document when a session starts, and one
HTTP request per tool call (through httpx). Non-2xx answers are error results the model
can read.

Where a call may go is decided here at every call. The call's input says which spec
entry and which operation it is; what they stand for (the URL, where each argument
goes, the header variables) is looked up in the worker's registries again, never taken
from the input, since an input can be written by anyone who can start a workflow.

Turning a document into tools comes first, and is pure: one tool per operation, its
parameters and JSON body projected to one JSON schema."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx

from durable_agent._contracts.boundary import ResolvedTool
from durable_agent._errors import DurableAgentError, NotAllowed
from durable_agent._spec.document import OpenApiSpec, ToolSource
from durable_agent._spec.tool_kinds import HttpCall, HttpOperation, OpenApiKind, WorkerSide
from durable_agent._spec.tools import ToolContext, ToolPolicy
from durable_agent._wire.messages import ToolDefinition

# OpenAPI 3.0/3.1 documents as tools: one per operation, named by its ``operationId``,
# its path, query and header parameters and its JSON body projected to one JSON schema.
#
# Pure: the worker reads the document (the worker half, below) and this turns it into
# tools, or says exactly why it cannot.

METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
MAX_REF_DEPTH = 32


class OpenApiError(DurableAgentError, ValueError):
    """The document cannot be used; the message names the source and the problem."""


def _resolve(doc: dict[str, Any], node: Any, depth: int = 0) -> Any:
    """``node`` with every local ``$ref`` replaced by what it points at."""
    if depth > MAX_REF_DEPTH:
        raise OpenApiError("references nest too deep (a cycle?)")
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#/"):
                raise OpenApiError(f"only local references are supported, not {ref!r}")
            target: Any = doc
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise OpenApiError(f"reference {ref!r} points at nothing")
                target = target[part]
            return _resolve(doc, target, depth + 1)
        return {k: _resolve(doc, v, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(doc, v, depth + 1) for v in node]
    return node


def base_url_of(doc: dict[str, Any], api: OpenApiSpec) -> str:
    if api.base_url:
        return api.base_url.rstrip("/")
    servers = doc.get("servers") or []
    url = servers[0].get("url") if servers and isinstance(servers[0], dict) else None
    if not url:
        raise OpenApiError("the document names no servers URL: set base_url")
    if "://" not in url:
        if api.document is None or "://" not in api.document:
            raise OpenApiError(f"servers URL {url!r} is relative to a file: set base_url")
        url = urljoin(api.document, url)
    return str(url).rstrip("/")


def operation_tools(doc: Any, api: OpenApiSpec) -> list[ResolvedTool]:
    """The document's operations as tools (those ``api.operations`` keeps)."""
    if not isinstance(doc, dict) or not str(doc.get("openapi", "")).startswith("3."):
        raise OpenApiError("not an OpenAPI 3.0/3.1 document (no 'openapi: 3.x' field)")
    base = base_url_of(doc, api)
    wanted = None if api.operations is None else set(api.operations)
    tools: list[ResolvedTool] = []
    for path, item in (doc.get("paths") or {}).items():
        item = _resolve(doc, item)
        shared = item.get("parameters") or []
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict) or not op.get("operationId"):
                continue  # without an operationId there is no name to offer it by
            name = op["operationId"]
            if wanted is not None and name not in wanted:
                continue
            try:
                tools.append(_tool(api, base, path, method, op, shared))
            except OpenApiError as error:
                raise OpenApiError(
                    f"operation {name!r} ({method.upper()} {path}): {error}"
                ) from None
    missing = sorted((wanted or set()) - {t.definition.name[len(api.prefix) :] for t in tools})
    if missing:
        raise OpenApiError(f"operations names operations it does not have: {', '.join(missing)}")
    return tools


def _tool(
    api: OpenApiSpec,
    base: str,
    path: str,
    method: str,
    op: dict[str, Any],
    shared: list[dict[str, Any]],
) -> ResolvedTool:
    params = {(p["name"], p["in"]): p for p in [*shared, *(op.get("parameters") or [])]}
    properties: dict[str, Any] = {}
    required: list[str] = []
    where: dict[str, list[str]] = {"path": [], "query": [], "header": []}
    for (name, location), param in params.items():
        if location not in where:
            raise OpenApiError(f"parameter {name!r} is in {location}, which tools cannot fill")
        parameter = dict(param.get("schema") or {"type": "string"})
        if param.get("description"):
            parameter.setdefault("description", param["description"])
        properties[name] = parameter
        where[location].append(name)
        if param.get("required") or location == "path":
            required.append(name)
    body = op.get("requestBody")
    if body:
        content = body.get("content") or {}
        json_body = content.get("application/json")
        if json_body is None:
            kinds = ", ".join(content) or "none"
            raise OpenApiError(f"its request body is not JSON ({kinds})")
        properties["body"] = json_body.get("schema") or {"type": "object"}
        if body.get("required"):
            required.append("body")
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    description = op.get("summary") or op.get("description") or f"{method.upper()} {path}"
    try:
        definition = ToolDefinition(
            name=api.prefix + op["operationId"], description=description, parameters=schema
        )
    except ValueError as error:
        raise OpenApiError(str(error)) from None
    return ResolvedTool(
        definition=definition,
        policy=ToolPolicy(
            approval=api.approval,
            timeout_seconds=api.timeout_seconds,
            max_attempts=api.max_attempts,
            max_result_chars=api.max_result_chars,
        ),
        target=HttpOperation(
            api=api.name,
            method=method.upper(),
            url=base + path,
            path=where["path"],
            query=where["query"],
            header=where["header"],
            body=bool(body),
            operation_id=op["operationId"],
        ),
    )


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
    operation: HttpOperation,
    header_variables: dict[str, str],
    arguments: dict[str, Any],
    timeout_seconds: float = 60.0,
) -> tuple[str, bool]:
    """The answer's body, and whether it was an error (non-2xx, with the status).
    ``header_variables``: the service's headers as the worker registered them (a
    redirect is answered as it is, never followed). A path value that would change
    which operation is called (``.``, ``..``, empty) is refused, and so is a URL whose
    path does not have the operation's shape once the HTTP client has built it."""
    url = operation.url
    for name in operation.path:
        if name not in arguments:
            return f"missing path parameter {name!r}", True
        value = str(arguments[name])
        if value in ("", ".", ".."):
            return f"path parameter {name!r}: {value!r} is not a value a path segment takes", True
        url = url.replace(f"{{{name}}}", quote(value, safe=""))
    query = {n: arguments[n] for n in operation.query if arguments.get(n) is not None}
    headers = _headers(header_variables)
    headers.update({n: str(arguments[n]) for n in operation.header if n in arguments})
    body = arguments.get("body") if operation.body else None
    async with httpx.AsyncClient(timeout=timeout_seconds, follow_redirects=False) as client:
        request = client.build_request(
            operation.method,
            url,
            params=query,
            headers=headers,
            json=body if operation.body and body is not None else None,
        )
        if not _fits_template(request.url, operation):
            raise NotAllowed(
                f"{operation.method} {request.url.path} is not the operation "
                f"{operation.method} {urlsplit(operation.url).path}"
            )
        response = await client.send(request)
    kind = response.headers.get("content-type", "").split(";")[0].strip()
    textual = not kind or kind.startswith("text/") or "json" in kind or "xml" in kind
    body_text = response.text if textual else f"[{kind}, {len(response.content)} bytes, not shown]"
    if response.is_success:
        return body_text, False
    return f"HTTP {response.status_code} {response.reason_phrase}: {body_text}", True


def _fits_template(url: httpx.URL, operation: HttpOperation) -> bool:
    """Whether the URL's path is the operation's template with one segment per path
    parameter, as sent (percent-encoded: no separator or dot segment of a value's own)."""
    template = urlsplit(operation.url).path.split("/")
    sent = url.raw_path.decode("ascii").split("?", 1)[0].split("/")
    if len(sent) != len(template):
        return False
    for want, got in zip(template, sent, strict=True):
        parameter = want.startswith("{") and want.endswith("}") and want[1:-1] in operation.path
        if parameter:
            if got in ("", ".", "..") or "/" in got:
                return False
        elif quote(want, safe="/:@!$&'()*+,;=-._~%") != got:
            return False
    return True


class OpenApiRunner(OpenApiKind):
    """The OpenAPI kind, with what only a worker does."""

    async def admit(self, source: ToolSource, worker: WorkerSide) -> OpenApiSpec:
        """The service for a spec's entry: the registered one by that name (the entry
        may narrow its operations, rename their prefix and add approval), or the entry
        itself where the policy lets a spec give a service whole (its URLs checked; a
        file on the worker only where the policy allows that too)."""
        assert isinstance(source, OpenApiSpec)
        capabilities = worker.capabilities
        if not source.given_whole():
            service: OpenApiSpec = capabilities.narrowed_source(source, "OpenAPI service")
            return service
        if not capabilities.policy.gives_whole("openapi"):
            raise NotAllowed(
                f"OpenAPI service {source.name!r}: a spec may not carry its document "
                f"({source.document!r}) on this worker; name a registered service "
                f"({capabilities.registered_names('openapi')})"
            )
        assert source.document is not None
        if "://" in source.document:
            await capabilities.check_url(source.document)
        elif not capabilities.policy.worker_files:
            raise NotAllowed(
                f"OpenAPI service {source.name!r}: a spec may not name a file on the worker "
                f"({source.document!r})"
            )
        if source.base_url is not None:
            await capabilities.check_url(source.base_url)
        return source

    async def tools(self, source: ToolSource, worker: WorkerSide) -> list[ResolvedTool]:
        """The service's operations; a registered service's approval is their floor."""
        listed = await list_api_tools(await self.admit(source, worker))
        floored: list[ResolvedTool] = worker.capabilities.floored(source, listed)
        return floored

    async def run(
        self, call: HttpCall, arguments: dict[str, Any], context: ToolContext, worker: WorkerSide
    ) -> tuple[str, bool]:
        operation, headers = await self.checked(call, worker)
        return await call_operation(operation, headers, arguments, call.timeout_seconds)

    async def identity(self, call: HttpCall, worker: WorkerSide) -> str | None:
        if worker.capabilities.registered("openapi", call.operation.api) is None:
            return None  # a service the spec carried: the owner granted it nothing
        operation, _ = await self.checked(call, worker)
        return f"openapi:{operation.api}/{operation.operation_id}"

    async def checked(
        self, call: HttpCall, worker: WorkerSide
    ) -> tuple[HttpOperation, dict[str, str]]:
        """The operation as the worker's registry has it now (found again in the
        registered service's document, among the operations the session may call), and
        the header variables the call may carry; ``NotAllowed`` or ``NotRegistered`` when
        the worker does not let it go. The call's recorded operation only picks which
        one: where its parameters go and the URL come from the registry."""
        capabilities = worker.capabilities
        name = call.operation.api
        registered = capabilities.registered("openapi", name)
        if registered is None:
            if not capabilities.policy.gives_whole("openapi"):
                raise NotAllowed(f"OpenAPI service {name!r} is not registered on this worker")
            await capabilities.check_url(call.operation.url)
            return call.operation, call.headers
        service = await self.admit(OpenApiSpec(name=name, operations=call.operations), worker)
        wanted = (call.operation.method, call.operation.url)
        for tool in operation_tools(await _document(service, worker), service):
            found = tool.target
            if isinstance(found, HttpOperation) and (found.method, found.url) == wanted:
                return found, dict(registered.headers)
        raise NotAllowed(
            f"{call.operation.method} {call.operation.url} is not an operation of the "
            f"registered service {name!r} that this session may call"
        )


#: How long a worker keeps a registered service's document before reading it again.
DOCUMENT_SECONDS = 60.0


async def _document(service: OpenApiSpec, worker: WorkerSide) -> Any:
    """The registered service's document, read at most once a minute per worker."""
    key = f"openapi-document:{service.name}"
    known = worker.memo.get(key)
    if known is not None and time.monotonic() - known[0] < DOCUMENT_SECONDS:
        return known[1]
    document = await read_document(service)
    worker.memo[key] = (time.monotonic(), document)
    return document
