"""A run's input after continue-as-new: the spec, the Session's carried state and the
live event log's newest part (temporalio's stream state: this is a Temporal contract,
so it lives beside the workflow, not in the pure core)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator
from temporalio.contrib.workflow_streams import WorkflowStreamState

from durable_agent._session import SessionState
from durable_agent._spec._spec import AgentSpec


class ContinuedInput(BaseModel):
    """A run's input after continue-as-new: the spec and the carried state (the same JSON
    shape ``AgentInput`` had with ``carried``, so recorded histories still read)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: AgentSpec
    carried: SessionState
    events: WorkflowStreamState | None = None
    """The newest of the session's live events (their offsets go on in the new run)."""

    @model_validator(mode="before")
    @classmethod
    def _no_fresh_fields(cls, value: object) -> object:
        if isinstance(value, dict) and (value.get("message") is not None or value.get("history")):
            raise ValueError("carried: a continued session takes no message or history")
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in ("message", "history")}
        return value
