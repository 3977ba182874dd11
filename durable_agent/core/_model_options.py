"""Provider-neutral request options and the per-provider reasoning egress policy."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from ._contract import nulls_kept


class NamedToolChoice(BaseModel):
    """Make the model call this one tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)


ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


class ModelOptions(BaseModel):
    """Sampling and length options; each codec maps them to its API's names.

    An option an API does not support is left out silently. ``extra`` is passed
    through unmapped (``logprobs``, ``parallel_tool_calls``, ``reasoning_effort``, ...);
    a mapped option of the same name wins over it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, gt=0)
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    tool_choice: ToolChoice | None = None
    """Whether the model may, must or must not call tools, or must call one named tool;
    each codec writes its API's shape, and only when the request has tools."""
    extra: dict[str, Any] = Field(default_factory=dict)


class ReasoningWire(BaseModel):
    """How a Chat Completions provider wants reasoning resent on tool-call turns.

    Structured ``reasoning_details`` are resent verbatim when present (and
    accepted); otherwise the flat string goes under ``field``. Never both.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: Literal["reasoning_content", "reasoning"] | None = "reasoning_content"
    """Name of the flat reasoning field; ``None`` never resends reasoning."""

    send_details: bool = True
    """Resend ``reasoning_details`` verbatim when the turn has them."""
    send_empty: bool = False
    """Send the flat field as ``""`` on tool-call turns with no reasoning (DeepSeek
    thinking mode rejects a tool-call turn without it)."""

    @model_serializer(mode="wrap")
    def _never_kept(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        return nulls_kept(self, handler(self), info, ("field",))
