"""A session's live events: what a reader sees happen, in order, each at an offset.

The workflow publishes most of them into its event log (``workflows/live_feed.py``);
the model activity publishes the text and reasoning deltas as the provider sends them
(``activities/live_deltas.py``). ``SessionHandle.follow`` reads them back. Pure models:
the same types on every side.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from durable_agent._contracts.approvals import PendingApproval
from durable_agent._contracts.boundary import AgentResult
from durable_agent._wire.messages import ApprovalRecord, Message, Usage

#: The workflow stream topic every session event is published on.
EVENTS_TOPIC = "events"
#: A message bigger than this (JSON bytes) is announced without its body: a reader
#: fetches it with the ``messages`` query (the event log stays small).
MESSAGE_EVENT_MAX_BYTES = 32_000
#: Characters of a tool's result a ``tool_finished`` event carries.
TOOL_RESULT_EVENT_CHARS = 2_000


class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    offset: int = -1
    """Where the event sits in the session's log (set by the reader; -1 before)."""


class TurnStarted(_Event):
    type: Literal["turn_started"] = "turn_started"
    turn: int


class ModelStarted(_Event):
    """A model call began: text deltas that follow belong to it."""

    type: Literal["model_started"] = "model_started"
    turn: int
    agent: str | None = None
    model: str


class AttemptRestarted(_Event):
    """The model call started over (its worker was lost, or the provider failed): the
    text and reasoning shown since its ``model_started`` are void."""

    type: Literal["attempt_restarted"] = "attempt_restarted"
    turn: int
    attempt: int
    reason: str


class TextDelta(_Event):
    type: Literal["text_delta"] = "text_delta"
    turn: int
    text: str


class ReasoningDelta(_Event):
    type: Literal["reasoning_delta"] = "reasoning_delta"
    turn: int
    text: str


class ToolStarted(_Event):
    type: Literal["tool_started"] = "tool_started"
    turn: int
    slot: int
    call_id: str
    name: str


class ToolFinished(_Event):
    type: Literal["tool_finished"] = "tool_finished"
    turn: int
    slot: int
    call_id: str
    name: str
    duration_ms: int
    error: bool
    result: str | None = None
    """The result's text, its first ``TOOL_RESULT_EVENT_CHARS`` characters (the whole is
    the ``tool`` message)."""


class ApprovalRequested(_Event):
    type: Literal["approval_requested"] = "approval_requested"
    approval: PendingApproval


class ApprovalDecided(_Event):
    type: Literal["approval_decided"] = "approval_decided"
    approval_id: str
    record: ApprovalRecord


class MessageAppended(_Event):
    type: Literal["message_appended"] = "message_appended"
    index: int
    message: Message | None = None
    """``None`` when it is over ``MESSAGE_EVENT_MAX_BYTES`` (read it by ``index``)."""
    run: int | None = None
    """The session's run (1, then one more per continue-as-new) it landed in."""


class UsageReported(_Event):
    type: Literal["usage"] = "usage"
    turn: int
    usage: Usage
    """This call's tokens."""
    total: Usage
    """The session's so far."""


class ErrorReported(_Event):
    type: Literal["error"] = "error"
    turn: int
    text: str
    kind: str | None = None


class Rescued(_Event):
    """A model turn could not be used (or stopped before it was complete) and the loop
    did what ``rescue`` or ``stop.on_truncated`` says (the ``resque`` message)."""

    type: Literal["rescued"] = "rescued"
    strategy: str | None = None
    attempt: int
    reason: str | None = None


class Flushed(_Event):
    """The history was reset (a ``flush`` marker): requests start afresh after it."""

    type: Literal["flushed"] = "flushed"
    by: str | None = None
    reason: str | None = None


class Compacted(_Event):
    """A summary now stands in, in requests, for the array's first ``compacts`` messages."""

    type: Literal["compacted"] = "compacted"
    compacts: int | None = None


class HostedToolUsed(_Event):
    """The model used one of the provider's own tools in its reply (a web search, a
    file search, code the provider ran): the provider ran it, no worker did, and no
    approval gated it (the endpoint's owner allowed the tool)."""

    type: Literal["hosted_tool"] = "hosted_tool"
    id: str
    name: str
    status: str
    detail: str = ""
    """What it looked for or ran, shortened."""


class Trimmed(_Event):
    """The request about to be made leaves the oldest ``count`` messages out to fit."""

    type: Literal["trimmed"] = "trimmed"
    count: int


class GuardrailBlocked(_Event):
    """A guardrail stopped a user message (``input``) or an answer (``output``)."""

    type: Literal["guardrail_blocked"] = "guardrail_blocked"
    kind: Literal["input", "output"]
    reason: str


class TurnEnded(_Event):
    """A turn ended without an answer: ``reason`` is ``cancelled``, ``guardrail``,
    ``unusable_reply``, ``truncated``, ``compaction_failed``, ``max_turns`` or
    ``error`` (a model call that failed for good)."""

    type: Literal["turn_ended"] = "turn_ended"
    turn: int
    reason: str
    error: str


class CapacityWait(_Event):
    """The model call found no capacity on its endpoint's shared limit: the session waits in
    line (``status.waiting_for_capacity``) until the limiter keeps capacity for it."""

    type: Literal["capacity_wait"] = "capacity_wait"
    turn: int
    endpoint: str


class CapacityGranted(_Event):
    """Capacity was kept for the waiting call: it is made now."""

    type: Literal["capacity_granted"] = "capacity_granted"
    turn: int
    endpoint: str


class AgentChanged(_Event):
    """In a swarm, another agent answers now (a handoff, or a person's move)."""

    type: Literal["agent_changed"] = "agent_changed"
    agent: str | None = None
    previous: str | None = None


class Idle(_Event):
    """The session answered and waits for a message."""

    type: Literal["idle"] = "idle"
    message_count: int


class Ended(_Event):
    type: Literal["ended"] = "ended"
    result: AgentResult | None = None
    """Unset when the session failed outside the loop (its error says why)."""
    error: str | None = None


class Gap(_Event):
    """The reader fell behind the bounded log: ``missed`` events are gone (the
    ``messages`` query still has every message)."""

    type: Literal["gap"] = "gap"
    missed: int


LiveEvent = Annotated[
    TurnStarted
    | ModelStarted
    | AttemptRestarted
    | TextDelta
    | ReasoningDelta
    | ToolStarted
    | ToolFinished
    | ApprovalRequested
    | ApprovalDecided
    | MessageAppended
    | UsageReported
    | ErrorReported
    | Rescued
    | Flushed
    | Compacted
    | HostedToolUsed
    | Trimmed
    | GuardrailBlocked
    | TurnEnded
    | CapacityWait
    | CapacityGranted
    | AgentChanged
    | Idle
    | Ended
    | Gap,
    Field(discriminator="type"),
]
live_event_adapter: TypeAdapter[LiveEvent] = TypeAdapter(LiveEvent)


def read_event(data: Any, offset: int) -> LiveEvent:
    """An event as published (a dict), at its offset in the log."""
    event = live_event_adapter.validate_python(data)
    return event.model_copy(update={"offset": offset})
