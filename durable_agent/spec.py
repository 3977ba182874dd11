"""The agent spec: plain JSON a person can write, validated at the session's start."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from durable_agent.messages import Message, UserMessage
from durable_agent.model_options import ModelOptions, ReasoningWire
from durable_agent.provider import ProviderEndpoint
from durable_agent.tools import ApprovalMode, ExecutionMode


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(_Spec):
    """Which model, where, and how to call it."""

    name: str = Field(min_length=1)
    """The provider's model id, e.g. ``gpt-4o``."""
    endpoint: ProviderEndpoint = Field(default_factory=ProviderEndpoint)
    options: ModelOptions = Field(default_factory=ModelOptions)
    reasoning: ReasoningWire = Field(default_factory=ReasoningWire)
    stream: bool = True
    """Stream the reply (the activity heartbeats while it streams)."""
    timeout_seconds: float = Field(default=600.0, gt=0)
    max_attempts: int = Field(default=5, ge=1)
    """Attempts for retryable provider failures (429, 5xx, transport, broken streams)."""
    initial_retry_seconds: float = Field(default=1.0, gt=0)
    max_retry_seconds: float = Field(default=60.0, gt=0)


class ToolSettings(_Spec):
    """A tool the session may use, with per-session overrides of its policy."""

    name: str = Field(min_length=1)
    approval: ApprovalMode | None = None
    deny_reason: str | None = None
    execution_mode: ExecutionMode | None = None
    approval_timeout_seconds: float | None = Field(default=None, gt=0)
    approval_timeout_decision: Literal["approved", "denied"] | None = None


class StopRules(_Spec):
    max_turns: int = Field(default=25, ge=1)
    """Most model calls in one user turn before the session stops with an error."""
    on_tools: list[str] = Field(default_factory=list)
    """Stop after running any of these tools (its result is the final answer)."""


class AgentSpec(_Spec):
    model: ModelSpec
    instructions: str | None = None
    """The system prompt."""
    tools: list[ToolSettings] = Field(default_factory=list)
    tool_execution: ExecutionMode = "parallel"
    context: dict[str, Any] = Field(default_factory=dict)
    """Values tools can be bound to (``@tool(bind={"unit": "preferred_unit"})``); never
    shown to the model. Not a place for secrets: it is workflow state."""
    stop: StopRules = Field(default_factory=StopRules)
    output_schema: dict[str, Any] | None = None
    """JSON Schema of a structured final answer."""

    @field_validator("tools", mode="before")
    @classmethod
    def _names_as_shorthand(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _unique_tools(self) -> AgentSpec:
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tools: {duplicates[0]!r} is listed more than once")
        unknown_stops = sorted(set(self.stop.on_tools) - set(names))
        if unknown_stops:
            raise ValueError(f"stop.on_tools: {unknown_stops[0]!r} is not among the spec's tools")
        return self


class AgentInput(_Spec):
    """The workflow's input: the spec and the first user message."""

    spec: AgentSpec
    message: str | UserMessage | None = None
    history: list[Message] = Field(default_factory=list)
    """Earlier messages to continue from (after the instructions, before ``message``)."""
