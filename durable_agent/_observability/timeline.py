"""A session's timeline, read from its Temporal history (every run of it): each model
call with its latency and tokens, each tool execution with its duration, each approval
with how long the person took. The history is the durable record, so the timeline is
complete and counts a retried call once (by its final attempt)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.api.history.v1 import HistoryEvent
from temporalio.converter import PayloadConverter

from durable_agent._contracts.boundary import (
    ModelCallInput,
    ModelReturn,
    ModelSetup,
    ToolCallInput,
    ToolReturn,
)
from durable_agent._wire.messages import AssistantMessage, Message, ToolCall, ToolMessage


@dataclass
class Span:
    kind: str
    """``model``, ``tool`` or ``approval``."""
    label: str
    start: datetime
    end: datetime
    turn: int
    detail: str = ""
    input_tokens: int = 0
    cached_tokens: int = 0
    """Of ``input_tokens``, those the provider's prompt cache served."""
    cache_write_tokens: int = 0
    """Of ``input_tokens``, those written to the provider's prompt cache."""
    output_tokens: int = 0
    error: bool = False
    model: str = ""
    cost_usd: float | None = None
    """By the model's price, lost attempts' tokens included (unset: no price)."""

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()


@dataclass
class Timeline:
    session_id: str
    spans: list[Span] = field(default_factory=list)

    def of(self, kind: str) -> list[Span]:
        return [s for s in self.spans if s.kind == kind]

    @property
    def start(self) -> datetime | None:
        return min((s.start for s in self.spans), default=None)

    @property
    def end(self) -> datetime | None:
        return max((s.end for s in self.spans), default=None)


#: When each tool call reached the workflow (its model call completed) and in which
#: turn, by call id in order (providers reuse ids, so they pair up by order).
Asked = dict[str, list[tuple[datetime, int]]]


def timeline_from_history(
    session_id: str,
    runs: list[list[HistoryEvent]],
    converter: PayloadConverter,
    messages: list[Message],
) -> Timeline:
    """The spans of every run's history (oldest run first), and the approvals people
    decided, from the array (denied calls never ran)."""
    timeline = Timeline(session_id)
    asked: Asked = {}
    setups: dict[str, ModelSetup] = {}  # sent inline once, then by digest (across runs)
    for events in runs:
        _add_run(timeline, events, converter, asked, setups)
    for message in messages:
        if isinstance(message, ToolMessage):
            waiting = asked.get(message.tool_call_id) or []
            if waiting:
                _add_approval(timeline, message, *waiting.pop(0))
    timeline.spans.sort(key=lambda s: (s.start, s.kind))
    return timeline


def _add_run(
    timeline: Timeline,
    events: list[HistoryEvent],
    converter: PayloadConverter,
    asked: Asked,
    setups: dict[str, ModelSetup],
) -> None:
    scheduled: dict[int, tuple[str, Any, datetime]] = {}
    started: dict[int, datetime] = {}
    replied: tuple[datetime, int] | None = None  # the last reply: its further calls' pages
    for event in events:
        at = event.event_time.ToDatetime()
        if event.HasField("activity_task_scheduled_event_attributes"):
            attributes = event.activity_task_scheduled_event_attributes
            kind = attributes.activity_type.name
            if kind == "reply_calls":
                scheduled[event.event_id] = (kind, None, at)
            elif kind in ("call_model", "run_tool"):
                payload = attributes.input.payloads[0]
                call_type = ModelCallInput if kind == "call_model" else ToolCallInput
                call = converter.from_payload(payload, call_type)
                if isinstance(call, ModelCallInput) and call.setup is not None:
                    setups[call.setup_digest] = call.setup
                scheduled[event.event_id] = (kind, call, at)
        elif event.HasField("activity_task_started_event_attributes"):
            attributes_started = event.activity_task_started_event_attributes
            started[attributes_started.scheduled_event_id] = at
        elif event.HasField("activity_task_completed_event_attributes"):
            completed = event.activity_task_completed_event_attributes
            if completed.scheduled_event_id not in scheduled:
                continue
            kind, call, _ = scheduled[completed.scheduled_event_id]
            if kind == "reply_calls":  # more of the last reply's calls
                page = converter.from_payload(completed.result.payloads[0], list[ToolCall])
                if replied is not None:
                    for tool_call in page:
                        asked.setdefault(tool_call.id, []).append(replied)
                continue
            begin = started.get(completed.scheduled_event_id, at)
            result_type: type[Any] = AssistantMessage if kind == "call_model" else ToolMessage
            if call.digested:  # the result with its digest and size
                result_type = ModelReturn if kind == "call_model" else ToolReturn
            result = converter.from_payload(completed.result.payloads[0], result_type)
            calls = result.calls if isinstance(result, ModelReturn) else None
            if isinstance(result, ToolReturn | ModelReturn):
                result = result.message
            if isinstance(result, AssistantMessage):
                setup = setups.get(call.setup_digest)
                timeline.spans.append(_model_span(call, result, begin, at, setup, calls))
                replied = (at, call.turn)
                for tool_call in result.tool_calls or []:
                    asked.setdefault(tool_call.id, []).append(replied)
            elif isinstance(result, ToolMessage):
                timeline.spans.append(_tool_span(call, result, begin, at))


def _model_span(
    call: ModelCallInput,
    reply: AssistantMessage,
    begin: datetime,
    end: datetime,
    setup: ModelSetup | None,
    calls: int | None = None,
) -> Span:
    usage = reply.usage
    billed = [u for u in (usage, reply.voided_usage) if u is not None]
    price = setup.price if setup is not None else None
    cost = sum(price.cost_usd(u) for u in billed) if price is not None else None
    who = f"{reply.agent_name}: " if reply.agent_name else ""
    calls = calls if calls is not None else len(reply.tool_calls or [])  # all, if in pages
    detail = f"{calls} tool call{'s' * (calls != 1)}" if calls else (reply.finish_reason or "")
    return Span(
        kind="model",
        label=f"{who}model",
        start=begin,
        end=end,
        turn=call.turn,
        detail=detail,
        input_tokens=sum(u.prompt_tokens for u in billed),
        cached_tokens=sum(u.cached_tokens or 0 for u in billed),
        cache_write_tokens=sum(u.cache_write_tokens or 0 for u in billed),
        output_tokens=sum(u.completion_tokens for u in billed),
        error=bool(reply.is_error),
        model=setup.model if setup is not None else "",
        cost_usd=cost,
    )


def _tool_span(call: ToolCallInput, result: ToolMessage, begin: datetime, end: datetime) -> Span:
    return Span(
        kind="tool",
        label=call.tool_name,
        start=begin,
        end=end,
        turn=call.turn,
        detail="error" if result.is_error else "",
        error=bool(result.is_error),
    )


def _add_approval(timeline: Timeline, result: ToolMessage, begin: datetime, turn: int) -> None:
    record = result.approval
    if record is None or record.at is None or (record.by is None and not record.timed_out):
        return  # decided by a rule or a standing grant: nobody waited
    end = record.at.astimezone(UTC).replace(tzinfo=None)
    who = f" by {record.by}" if record.by else ""
    detail = f"{record.decision}{who}" + (" (timed out)" if record.timed_out else "")
    timeline.spans.append(
        Span(
            kind="approval",
            label=result.tool_name or result.tool_call_id,
            start=begin,
            end=max(end, begin),
            turn=turn,
            detail=detail,
        )
    )
