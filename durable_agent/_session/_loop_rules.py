"""Small pure rules of the turn loop: the model setup's digest, tool overrides, where a
conversation stands, titles, approval ids, execution groups and retry delays."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timedelta

from durable_agent._contracts._contracts import ModelSetup, ResolvedTool, Stage
from durable_agent._spec._spec import ToolSettings
from durable_agent._spec._tool_policy import ExecutionMode, ToolPolicy, stricter_settings
from durable_agent._wire._messages import AssistantMessage, Message, ToolMessage, UserMessage


def setup_digest(setup: ModelSetup) -> str:
    """Content hash of a session's model setup (canonical JSON; an unset field is left
    out, so a setup hashes the same whatever fields it does not use)."""
    later = ("context", "agent", "instructions", "inputs", "hooks", "price")
    unset = {k for k in later if getattr(setup, k) is None}
    data = setup.model_dump(mode="json", exclude=unset)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def apply_overrides(
    listed: Sequence[ToolSettings], execution: ExecutionMode, resolved: Sequence[ResolvedTool]
) -> dict[str, ResolvedTool]:
    """The listed tools with their per-session policy overrides applied: over a tool
    the worker's owner gates, only those that make it stricter."""
    by_name = {t.definition.name: t for t in resolved}
    tools: dict[str, ResolvedTool] = {}
    for settings in listed:
        base = by_name[settings.name]
        update = {
            key: value
            for key, value in settings.model_dump(exclude={"name"}).items()
            if value is not None
        }
        if base.floor is not None:
            update = stricter_settings(base.policy, update)
        if execution == "sequential":
            update["execution_mode"] = "sequential"
        policy = base.policy.model_copy(update=update) if update else base.policy
        tools[settings.name] = base.model_copy(update={"policy": policy})
    return tools


def stage_after(messages: Sequence[Message]) -> Stage:
    """What a conversation given at start needs next: an answer when it ends with a user
    or tool message; otherwise nothing until someone writes. Calls left unanswered in a
    given history are never executed (the wire answers them with an error result)."""
    if messages and isinstance(messages[-1], UserMessage | ToolMessage):
        return "model"
    return "idle"


def approval_id(turn: int, slot: int) -> str:
    """Unique per pending call within a session, and stable across replays."""
    return f"turn{turn}-call{slot}"


def execution_groups(slots: Sequence[int], modes: Sequence[ExecutionMode]) -> list[list[int]]:
    """Runs of calls that may overlap, in request order: consecutive parallel calls run
    together; a sequential call runs alone, never overlapping another call."""
    groups: list[list[int]] = []
    joinable = False
    for slot, mode in zip(slots, modes, strict=True):
        if mode == "parallel" and joinable:
            groups[-1].append(slot)
        else:
            groups.append([slot])
        joinable = mode == "parallel"
    return groups


MAX_TOOL_RETRY_SECONDS = 60.0


def tool_retry_delay(policy: ToolPolicy, attempt: int) -> timedelta | None:
    """After the tool's own failure on ``attempt``: the wait before the next attempt, or
    ``None`` when that was its last."""
    if attempt >= policy.max_attempts:
        return None
    return backoff(policy.initial_retry_seconds, MAX_TOOL_RETRY_SECONDS, attempt)


def backoff(initial: float, maximum: float, failures: int) -> timedelta:
    """The wait before the next attempt after ``failures`` failed ones (1, 2, 4, ... times
    ``initial``, at most ``maximum``)."""
    return timedelta(seconds=min(initial * 2 ** max(failures - 1, 0), maximum))


def epoch_ms(now: datetime) -> int:
    """A message's ``timestamp``: milliseconds since the epoch, from the time given."""
    return int(now.timestamp() * 1000)


def last_reply(messages: Sequence[Message]) -> AssistantMessage | ToolMessage | None:
    """The latest message the model or a tool wrote (a session's final word)."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage | ToolMessage):
            return message
    return None


def latest_finish_reason(messages: Sequence[Message]) -> str | None:
    """How the model's latest turn ended, as the provider said."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return message.finish_reason
    return None
