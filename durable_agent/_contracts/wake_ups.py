"""Wake-ups as they cross the workflow boundary: one as the session keeps it (in its
state, which continue-as-new carries, and in the ``wake_ups`` query), a starter's
request to set one (the ``set_wake_up`` update), and their times.

Times are computed in pure code: ``cronsim`` for cron rules, and each zone read from the
pinned ``tzdata`` package (never the system's zones, which differ between machines), so
every worker, and every replay, computes the same due times from the same workflow time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from cronsim import CronSim, CronSimError
from pydantic import BaseModel, ConfigDict, Field, model_validator

from durable_agent._spec.tool_kinds import zone
from durable_agent._wire.messages import Contract, UserMessage

#: The ``source`` of a message a wake-up brings: the loop made it, no person wrote it.
WAKE_UP_SOURCE = "wake_up"
SET_WAKE_UP_UPDATE = "set_wake_up"
CANCEL_WAKE_UP_UPDATE = "cancel_wake_up"
WAKE_UPS_QUERY = "wake_ups"
NOT_ENABLED = (
    "this agent has no wake-ups: its owner enables them with a toolsets entry "
    '{"kind": "wake_ups", "name": "wake_ups"} in the agent\'s spec'
)


class Refusal(str):
    """Why a wake-up was not set or cancelled: a sentence naming the bound and what to
    do instead."""


class WakeUp(Contract):
    """One wake-up a session holds. Times are milliseconds since the epoch, in workflow
    time (the server's clock as the history records it)."""

    id: str
    """``w`` and a number the session gives, never reused in the session."""
    due: int
    """When it fires next."""
    text: str
    """What the agent reads when it fires."""
    set_by: Literal["model", "starter"]
    every_seconds: int | None = None
    """Repeats at this interval (from its due time, not from when it fired)."""
    cron: str | None = None
    """Repeats on this five-field cron rule, read in ``timezone``."""
    timezone: str = "UTC"
    fired: int = 0
    """How many times it has fired so far."""


class WakeUpRequest(Contract):
    """What a starter asks for: exactly one of ``at`` (milliseconds since the epoch),
    ``after_seconds``, ``every_seconds`` or ``cron``."""

    text: str = Field(min_length=1)
    at: int | None = None
    after_seconds: float | None = None
    every_seconds: int | None = None
    cron: str | None = None
    timezone: str = "UTC"

    @model_validator(mode="after")
    def _one_when(self) -> WakeUpRequest:
        given = [self.at, self.after_seconds, self.every_seconds, self.cron]
        if sum(value is not None for value in given) != 1:
            raise ValueError("give exactly one of at, after_seconds, every_seconds or cron")
        return self


class WakeUpsState(BaseModel):
    """The ``WakeUps`` part's slice of the session's state."""

    model_config = ConfigDict(extra="forbid")

    pending: list[WakeUp] = Field(default_factory=list)
    """Every wake-up still to fire, in the order they were set."""
    made: int = 0
    """Wake-ups set in the session so far (the next id's number)."""


# --- times: cron rules and zones, in pure code -------------------------------------


def epoch(moment: datetime) -> int:
    """A time as wake-ups keep it: milliseconds since the epoch."""
    return int(moment.timestamp() * 1000)


def _moment(ms: int, zone_name: str = "UTC") -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC).astimezone(zone(zone_name))


def next_cron(rule: str, zone_name: str, after_ms: int) -> int:
    """The first time after ``after_ms`` that ``rule`` matches in the zone."""
    return epoch(next(CronSim(rule, _moment(after_ms, zone_name))))


def shown(ms: int, zone_name: str = "UTC") -> str:
    """A due time as people and models read it: ISO 8601 in the wake-up's zone."""
    return _moment(ms, zone_name).isoformat(timespec="seconds")


def following(wake_up: WakeUp, now: int) -> int | None:
    """A repeating wake-up's next due time after ``now`` (``None``: it does not repeat)."""
    if wake_up.every_seconds is not None:
        step = wake_up.every_seconds * 1000
        missed = (now - wake_up.due) // step + 1
        return wake_up.due + missed * step
    if wake_up.cron is not None:
        return next_cron(wake_up.cron, wake_up.timezone, now)
    return None


def describe(wake_up: WakeUp) -> str:
    """One line about a wake-up, as the list tool and the CLI show it."""
    repeat = ""
    if wake_up.every_seconds is not None:
        repeat = f", repeating every {wake_up.every_seconds} s"
    elif wake_up.cron is not None:
        repeat = f", repeating on {wake_up.cron!r} ({wake_up.timezone})"
    due = shown(wake_up.due, wake_up.timezone)
    return f"{wake_up.id}: due {due}{repeat}, set by the {wake_up.set_by}: {wake_up.text}"


def request_from_tool(arguments: dict[str, Any], default_zone: str = "UTC") -> WakeUpRequest:
    """The model's arguments as a request: ``at`` is an ISO 8601 time, read in
    ``timezone`` when it has no offset; a call that names no zone is in
    ``default_zone`` (the one its spec gives, else UTC)."""
    zone_name = arguments.get("timezone") or default_zone
    if not isinstance(zone_name, str):
        raise ValueError("timezone is an IANA name such as Europe/Paris")
    at = arguments.get("at")
    at_ms = None
    if at is not None:
        if not isinstance(at, str):
            raise ValueError("at is an ISO 8601 date and time such as 2026-12-08T09:00:00")
        try:
            moment = datetime.fromisoformat(at)
        except ValueError:
            raise ValueError(f"at {at!r} is not an ISO 8601 date and time") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=zone(zone_name))
        at_ms = epoch(moment)
    fields = {k: arguments.get(k) for k in ("text", "after_seconds", "every_seconds", "cron")}
    try:
        return WakeUpRequest(at=at_ms, timezone=zone_name, **fields)
    except ValueError as error:  # pydantic's words, first problem only
        errors = getattr(error, "errors", None)
        first = errors()[0]["msg"] if callable(errors) else str(error)
        raise ValueError(str(first).removeprefix("Value error, ")) from None


def planned(
    request: WakeUpRequest, wake_up_id: str, now: int, shortest: int, ahead_days: int
) -> WakeUp | Refusal:
    """The wake-up ``request`` stands for, within the owner's bounds: repeats at least
    ``shortest`` seconds apart, due at most ``ahead_days`` from ``now``; why not, when
    it is refused."""
    try:
        zone(request.timezone)
        due = _first(request, now, shortest)
    except (ValueError, CronSimError) as error:
        return Refusal(f"refused: {error}")
    furthest = now + ahead_days * 86_400_000
    if isinstance(due, int) and due > furthest:
        return Refusal(
            f"refused: {shown(due, request.timezone)} is further ahead than this worker "
            f"allows ({ahead_days} days, until {shown(furthest)}); choose an earlier time"
        )
    if isinstance(due, Refusal):
        return due
    return WakeUp(
        id=wake_up_id,
        due=due,
        text=request.text,
        set_by="starter",
        every_seconds=request.every_seconds,
        cron=request.cron,
        timezone=request.timezone,
    )


def fired(pending: list[WakeUp], now: int) -> tuple[list[WakeUp], list[WakeUp]]:
    """The wake-ups still held after those due at ``now`` fire (a one-time one is gone,
    a repeating one moves to its next due time after ``now``), and those that fire, in
    due order."""
    due = sorted((w for w in pending if w.due <= now), key=lambda w: (w.due, w.id))
    ids = {w.id for w in due}
    kept = [w for w in pending if w.id not in ids]
    for w in due:
        later = following(w, now)
        if later is not None:
            kept.append(w.model_copy(update={"due": later, "fired": w.fired + 1}))
    return kept, due


def _first(request: WakeUpRequest, now: int, shortest: int) -> int | Refusal:
    if request.at is not None:
        if request.at < now:
            return Refusal(f"refused: {shown(request.at)} has already passed")
        return request.at
    if request.after_seconds is not None:
        if request.after_seconds < 0:
            return Refusal("refused: after_seconds is negative")
        return now + int(request.after_seconds * 1000)
    if request.every_seconds is not None:
        if request.every_seconds < shortest:
            return Refusal(
                f"refused: every {request.every_seconds} s is more often than this worker "
                f"allows (the shortest interval is {shortest} s); repeat every {shortest} s "
                "or more"
            )
        return now + request.every_seconds * 1000
    assert request.cron is not None
    first = next_cron(request.cron, request.timezone, now)
    gap = (next_cron(request.cron, request.timezone, first) - first) // 1000
    if gap < shortest:
        return Refusal(
            f"refused: the cron rule {request.cron!r} fires {gap} s apart, more often than "
            f"this worker allows (the shortest interval is {shortest} s)"
        )
    return first


def wake_up_message(wake_up: WakeUp, now: int) -> UserMessage:
    """The message a wake-up brings: marked as the loop's (``source``) and framed so the
    model reads it as its wake-up, not as something the user said."""
    who = "you" if wake_up.set_by == "model" else "the session's starter"
    due = shown(wake_up.due, wake_up.timezone)
    return UserMessage(
        content=f"[Wake-up {wake_up.id}, set by {who}, due {due}; not a message from the "
        f"user] {wake_up.text}",
        source=WAKE_UP_SOURCE,
        mode="tool",
        payload={"wake_up": wake_up.id, "due": wake_up.due},
        timestamp=now,
    )
