"""What crosses the workflow boundary: activity inputs, signals, query answers.

Kept lean: every activity input and result is stored in history forever.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from durable_agent.endpoint import ProviderEndpoint
from durable_agent.messages import ApprovalRecord, AssistantMessage, Message, ToolMessage, Usage
from durable_agent.model_options import ModelOptions, ReasoningWire
from durable_agent.tool_definition import ToolDefinition
from durable_agent.tools import ToolPolicy

WORKFLOW_NAME = "AgentWorkflow"
DEFAULT_TASK_QUEUE = "durable-agent"
#: Error type of a model call whose worker lacks the session's model setup.
MODEL_SETUP_UNKNOWN = "ModelSetupUnknown"
#: Error type of a model call whose worker cannot find the referenced transcript prefix.
TRANSCRIPT_UNKNOWN = "TranscriptUnknown"
#: Error type of a tool call whose tool itself raised or overran its time: one of the
#: tool's ``max_attempts``. (A lost worker is never reported this way: Temporal retries it.)
TOOL_RAISED = "ToolRaised"
#: Error type of a model attempt that failed in a way a later attempt may not (429, 5xx,
#: transport, a broken stream): one of the model's ``max_attempts``.
MODEL_ATTEMPT_FAILED = "ModelAttemptFailed"
#: Error type of a failure no retry can fix (a key's variable unset, an unknown API).
CONFIGURATION_ERROR = "ConfigurationError"
#: Seconds a tool activity's start-to-close exceeds the tool's own limit, which the
#: activity enforces itself: a start-to-close timeout then means a wedged worker.
TOOL_TIMEOUT_GRACE_SECONDS = 5.0


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResolveToolsInput(_Contract):
    names: list[str]


class ResolvedTool(_Contract):
    """A tool as the session recorded it at start: replay never asks a worker again."""

    definition: ToolDefinition
    policy: ToolPolicy
    bind: dict[str, str] = Field(default_factory=dict)


class ResolveToolsResult(_Contract):
    tools: list[ResolvedTool]
    missing: list[str] = Field(default_factory=list)
    """Names no worker-side tool answers to."""


class TranscriptRef(_Contract):
    """A transcript prefix by content: its length and its chain hash."""

    count: int = Field(ge=0)
    hash: str


class StoredMessageRef(_Contract):
    """A message a tool activity already put in history and in the store, by content hash."""

    stored: str


class ModelSetup(_Contract):
    """What stays the same across a session's model calls: sent once, cached by digest."""

    endpoint: ProviderEndpoint
    model: str
    options: ModelOptions
    reasoning: ReasoningWire
    stream: bool
    output_schema: dict[str, Any] | None = None
    tools: list[ToolDefinition] = Field(default_factory=list)


class ModelCallInput(_Contract):
    """Lean on purpose: stored in history once per model call, for the life of the session.
    (The session id is the activity's workflow id.)"""

    turn: int
    setup_digest: str
    setup: ModelSetup | None = None
    """Sent on a session's first call, or when a worker reported the digest unknown."""
    transcript: TranscriptRef | None = None
    """The prefix workers already hold; ``None`` when ``messages`` is the whole array."""
    messages: list[Message | StoredMessageRef]
    """The messages after ``transcript``'s prefix (all of them without one); tool results
    go by reference, since their activity's result already holds them."""
    head: str
    """Chain hash of the whole array, which the worker checks before calling the model."""


class StoreTranscriptInput(_Contract):
    """Put messages into the workers' store in budget-sized pieces (re-seeding after a
    store lost a transcript that no longer fits one payload)."""

    transcript: TranscriptRef | None = None
    messages: list[Message]
    head: str


class LoadTranscriptInput(_Contract):
    """Read a stored transcript back, a budget-sized page at a time."""

    transcript: TranscriptRef
    start: int = Field(ge=0)
    max_bytes: int = Field(gt=0)


class ToolCallInput(_Contract):
    """One call; the session id is the activity's workflow id."""

    turn: int
    slot: int
    tool_name: str
    tool_call_id: str
    arguments: str
    bound: dict[str, Any] = Field(default_factory=dict)
    approval: ApprovalRecord | None = None
    """How the call was approved, kept on its result (which is final as the activity
    returns it, so history holds it once)."""
    max_result_chars: int = 100_000
    attempt: int = Field(default=1, ge=1)
    """The tool's own attempt: 1 + the times it raised before (lost workers not counted)."""


class ApprovalCheckInput(_Contract):
    calls: list[tuple[str, str]]
    """(tool name, raw arguments) of the calls whose policy is a predicate."""


class ApprovalSignal(_Contract):
    approval_id: str
    by: str | None = None
    reason: str | None = None


class EndSessionSignal(_Contract):
    by: str | None = None
    reason: str | None = None


class PendingApproval(_Contract):
    approval_id: str
    turn: int
    slot: int
    tool_name: str
    arguments: str
    requested_at: datetime
    deadline: datetime | None = None


Phase = Literal[
    "starting", "calling_model", "awaiting_approval", "running_tools", "idle", "done", "failed"
]
#: What the session does next: call the model, run the open tool batch, or wait for a person.
Stage = Literal["model", "tools", "idle"]


class SessionStatus(_Contract):
    phase: Phase
    turn: int
    message_count: int
    pending_approvals: list[PendingApproval]
    usage: Usage
    last_error: str | None = None
    rejected_signals: list[str] = Field(default_factory=list)
    """Signals that changed nothing (unknown or already-decided approval ids, empty or
    oversized messages), newest last."""
    queued_messages: int = 0
    """User messages received but not yet delivered (they wait for the turn boundary)."""
    runs: int = 1
    """Runs of this session (1 + continue-as-new cycles)."""


class AgentResult(_Contract):
    """How a session ended. ``stop_reason``: ``final_answer`` (one-shot sessions),
    ``stop_tool:<name>``, ``ended``, ``idle_timeout``, ``max_turns`` or ``error``."""

    status: Literal["done", "failed"]
    stop_reason: str
    final: AssistantMessage | ToolMessage | None = None
    structured_output: Any = None
    error: str | None = None
    turns: int
    message_count: int
    usage: Usage
