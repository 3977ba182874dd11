"""The base of every model that crosses the workflow boundary: frozen, and strict about
unknown fields (a payload with a field nobody reads is refused, not silently dropped)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializationInfo, ValidationError


class Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def nulls_kept(
    model: BaseModel, data: dict[str, Any], info: SerializationInfo, names: tuple[str, ...]
) -> dict[str, Any]:
    """``data`` (the model as serialized) with ``names`` put back as ``null`` where nulls
    were left out: for a field whose ``None`` means something other than its default
    (read back without it, the default would come instead). Payloads leave nulls out
    (``durable_agent._payloads._lean``), and this is what keeps that lossless."""
    if info.exclude_none:
        for name in names:
            if getattr(model, name) is None:
                data[name] = None
    return data


def explain(error: Exception) -> str:
    """What was wrong with a payload, each bad field by its path (for error texts)."""
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(input)'}: {e['msg']}" for e in error.errors()
        )
    return str(error) or type(error).__name__
