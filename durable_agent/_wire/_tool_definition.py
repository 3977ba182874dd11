"""What a model is told about a tool: name, description, JSON schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class ToolDefinition(BaseModel):
    """A tool as the codecs project it; execution policy lives elsewhere."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments, bound parameters included."""
    strict: bool = False
    bound_parameters: tuple[str, ...] = ()
    """Parameters injected at call time (session id, idempotency key, context): hidden
    from the model, stripped from the wire schema."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        # The strictest provider rule (OpenAI and Anthropic): ^[a-zA-Z0-9_-]{1,64}$
        if not 1 <= len(name) <= 64 or not set(name) <= _NAME_CHARS:
            raise ValueError(
                f"tool name {name!r} must be 1-64 characters of letters, digits, '_' or '-'"
            )
        return name
