"""The base of every model that crosses the workflow boundary: frozen, and strict about
unknown fields (a payload with a field nobody reads is refused, not silently dropped)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
