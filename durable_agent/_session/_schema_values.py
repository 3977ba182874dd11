"""Arguments as the tool will receive them, for the rules that judge a call.

A tool's arguments are validated by pydantic in lax mode, so ``{"amount": "5000"}``
reaches the tool as ``5000``. A rule that compared the model's raw JSON would let that
call past ``deny when $.amount > 1000``. Pure: the gate coerces the raw arguments by
the tool's JSON Schema the way the validation will (numbers and booleans written as
strings, integral floats), and leaves anything else as it is.
"""

from __future__ import annotations

from typing import Any

_TRUE = {"true", "1", "yes", "on", "t", "y"}
_FALSE = {"false", "0", "no", "off", "f", "n"}


def as_validated(value: Any, schema: dict[str, Any] | None) -> Any:
    """``value`` coerced as lax validation against ``schema`` would coerce it."""
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if kind == "object" and isinstance(value, dict):
        properties = schema.get("properties") or {}
        return {k: as_validated(v, properties.get(k)) for k, v in value.items()}
    if kind == "array" and isinstance(value, list):
        return [as_validated(v, schema.get("items")) for v in value]
    if kind == "integer":
        return _integer(value)
    if kind == "number":
        return _number(value)
    if kind == "boolean" and isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return value


def _integer(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            number = _number(value)
            return int(number) if isinstance(number, float) and number.is_integer() else value
    return value


def _number(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return value
    return value
