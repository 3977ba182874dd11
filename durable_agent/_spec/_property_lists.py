"""Schemas written as property lists (``[{"name": ..., "kind": ..., "required": ...}]``,
as agent files such as Prompty's write inputs and outputs), projected to JSON Schema.

A spec's ``output_schema`` and a sub-agent's ``inputs`` take either form."""

from __future__ import annotations

from typing import Any

#: A property's ``kind`` and the JSON Schema type it is.
KIND_TO_TYPE = {
    "string": "string",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "boolean": "boolean",
    "array": "array",
    "object": "object",
}


def property_schema(prop: dict[str, Any]) -> dict[str, Any]:
    """One property as JSON Schema: its type, description, enum, items and properties."""
    kind = prop.get("kind", "string")
    if kind not in KIND_TO_TYPE:
        known = ", ".join(KIND_TO_TYPE)
        raise ValueError(f"property {prop.get('name', '?')!r}: unknown kind {kind!r} ({known})")
    schema: dict[str, Any] = {"type": KIND_TO_TYPE[kind]}
    if prop.get("description"):
        schema["description"] = prop["description"]
    if prop.get("enumValues"):
        schema["enum"] = prop["enumValues"]
    if "items" in prop:
        schema["items"] = property_schema(prop["items"])
    if "properties" in prop:
        schema.update(schema_from_properties(prop["properties"]))
    return schema


def schema_from_properties(properties: list[dict[str, Any]]) -> dict[str, Any]:
    """A property list as a JSON Schema object (``required`` from each property's)."""
    missing = [i for i, p in enumerate(properties) if not isinstance(p, dict) or "name" not in p]
    if missing:
        raise ValueError(f"properties {missing}: each needs a name")
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {p["name"]: property_schema(p) for p in properties},
    }
    required = [p["name"] for p in properties if p.get("required")]
    if required:
        schema["required"] = required
    return schema


def schema_or_properties(value: Any) -> Any:
    """A schema as given, or a property list as its schema (for pydantic validators)."""
    return schema_from_properties(value) if isinstance(value, list) else value
