"""OpenAPI 3.0/3.1 documents as tools: one per operation, named by its ``operationId``,
its path, query and header parameters and its JSON body projected to one JSON schema.

Pure: the worker reads the document (durable_agent/tools/_openapi.py) and this turns it into
tools, or says exactly why it cannot.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin

from durable_agent._contracts._contracts import ResolvedTool
from durable_agent._errors import DurableAgentError
from durable_agent._spec._spec import OpenApiSpec
from durable_agent._spec._tool_policy import ToolPolicy
from durable_agent._spec.tool_kinds._targets import HttpOperation
from durable_agent._wire._tool_definition import ToolDefinition

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
