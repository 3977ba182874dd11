"""JSON-schema projections shared by the codecs: bound parameters, strict mode."""

from __future__ import annotations

import copy
from typing import Any

from durable_agent._wire._tool_definition import ToolDefinition


def wire_parameters(tool: ToolDefinition) -> dict[str, Any]:
    """The tool's schema as the model sees it: bound parameters removed, strict applied."""
    schema = copy.deepcopy(tool.parameters)
    if tool.bound_parameters:
        properties = schema.get("properties", {})
        for name in tool.bound_parameters:
            properties.pop(name, None)
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r not in tool.bound_parameters]
            if not schema["required"]:
                del schema["required"]
    return strict_schema(schema) if tool.strict else schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also takes ``null``, one level deep: an optional field pydantic
    already wrote as ``anyOf [X, null]`` stays as it is (OpenAI's SDK writes it so too),
    and its ``default: null`` goes (the null is the default now)."""
    if schema.get("default", ...) is None:
        schema = {k: v for k, v in schema.items() if k != "default"}
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]} if kind != "null" else schema
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    options = schema.get("anyOf")
    if isinstance(options, list):
        if any(isinstance(o, dict) and o.get("type") == "null" for o in options):
            return schema
        return {**schema, "anyOf": [*options, {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI strict mode: every object closed and fully required, optional fields nullable.

    Applied recursively (properties, items, $defs, anyOf), on a copy.
    """
    out = copy.deepcopy(schema)
    _make_strict(out)
    return out


def _make_strict(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _make_strict(item)
        return
    if not isinstance(node, dict):
        return
    for key in ("items", "additionalItems", "not"):
        _make_strict(node.get(key))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        _make_strict(node.get(key))
    for key in ("$defs", "definitions"):
        for sub in (node.get(key) or {}).values():
            _make_strict(sub)
    properties = node.get("properties")
    is_object = node.get("type") == "object" or (
        isinstance(node.get("type"), list) and "object" in node["type"]
    )
    if properties is None and not is_object:
        return
    properties = properties or {}
    for sub in properties.values():
        _make_strict(sub)
    required = set(node.get("required", []))
    for name in list(properties):
        if name not in required:
            properties[name] = _nullable(properties[name])
    if is_object or properties:
        if properties:
            node["required"] = list(properties)
        node["additionalProperties"] = False
