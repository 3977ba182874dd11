"""Tools and calls as sessions recorded them before tool kinds: one optional field per
kind (``mcp``, ``http``, ``agent``, ``handoff``) instead of a ``target``. Histories and
running sessions hold that shape forever, so it is read into the new one."""

from __future__ import annotations

from typing import Any

_RECORDED = {"mcp": "mcp", "http": "openapi", "agent": "agent", "handoff": "handoff"}
_CALLED = {"mcp": "mcp", "http": "openapi"}


def legacy_resolved_tool(data: Any) -> Any:
    """A recorded tool's old kind field as its ``target``."""
    if not isinstance(data, dict) or not _RECORDED.keys() & data.keys():
        return data
    data = dict(data)
    for field, kind in _RECORDED.items():
        value = data.pop(field, None)
        if value is None:
            continue
        if kind == "agent":
            data["target"] = {"kind": kind, "agent": value}
        else:
            data["target"] = {"kind": kind, **_as_dict(value)}
    return data


def legacy_tool_call(data: Any) -> Any:
    """A call's old ``mcp``/``http`` field as its ``target``."""
    if not isinstance(data, dict) or not _CALLED.keys() & data.keys():
        return data
    data = dict(data)
    for field, kind in _CALLED.items():
        value = data.pop(field, None)
        if value is not None:
            data["target"] = {"kind": kind, **_as_dict(value)}
    return data


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    return dict(value.model_dump())  # a model given in Python, not JSON
