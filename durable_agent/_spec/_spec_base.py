"""The base of every part of an agent spec: unknown fields are errors (a typo must not
pass as a default), and a spec never changes once read."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
