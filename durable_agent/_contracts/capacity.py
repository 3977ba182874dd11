"""The limiter's book: who holds capacity on an endpoint, who waits, and who is next.

Pure and clock-free (every method takes ``now``, in seconds), so the limiter workflow
replays it and tests drive it directly. Its state is one pydantic model the limiter
carries across continue-as-new.

- **Requests and tokens** are counted over a sliding window (``window_seconds`` plus
  ``margin_seconds``) of grants; a grant's tokens are its estimate until its release
  says what the reply cost.
- **Concurrency** counts leases neither released nor past their hold.
- **A 429** halves what the endpoint takes and pauses every grant for its
  ``Retry-After``; each call that succeeds gives back a twentieth, up to the limit.
- **Fairness.** A call waits in line when others wait (nobody jumps the line), and
  capacity that frees goes to the waiting tenants in turn, so a tenant with many sessions
  cannot starve one with few.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from durable_agent._spec.endpoints import (
    CapacityAnswer,
    CapacityRelease,
    CapacityRequest,
    ProviderLimits,
)

#: The least share of its limits an endpoint keeps after 429s.
MIN_FACTOR = 0.1
#: What each successful call gives back after a 429 halved the rate.
RECOVERY_STEP = 0.05
#: A pause when a 429 named no Retry-After.
DEFAULT_PAUSE_SECONDS = 1.0
#: How long capacity kept for a waiting session stays kept (it may have ended meanwhile).
RESERVATION_SECONDS = 60.0
#: The longest a lease counts against concurrency, whatever its ask says: an ask is
#: anyone's to send, and one that holds for a year would stop the endpoint for a year. A
#: call that takes longer stops counting then.
MAX_HOLD_SECONDS = 3600.0


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Lease(_Model):
    lease: str
    session_id: str
    at: float
    """When it was granted (or its reservation claimed): what the window counts."""
    until: float
    """When it stops counting against concurrency (released, or its hold is over)."""
    tokens: int = 0
    reserved: bool = False
    """Kept for a waiting session that has not asked again yet."""


class Waiter(_Model):
    session_id: str
    run_id: str
    tenant: str
    tokens: int
    hold_seconds: float
    since: float


class LedgerState(_Model):
    limits: ProviderLimits = Field(default_factory=ProviderLimits)
    leases: list[Lease] = Field(default_factory=list)
    waiting: list[Waiter] = Field(default_factory=list)
    last_tenant: str | None = None
    factor: float = 1.0
    paused_until: float = 0.0
    issued: int = 0
    lease_prefix: str = ""
    """Set by the worker that starts a limiter whose id names its limits: leases are
    ``PREFIX-N``, a prefix made at random, so a lease cannot be named by guessing."""
    granted: int = 0
    waited: int = 0
    rate_limited: int = 0


class Ledger:
    def __init__(self, state: LedgerState) -> None:
        self.state = state

    # --- sessions asking, and giving back ---------------------------------------------

    def acquire(self, now: float, request: CapacityRequest) -> CapacityAnswer:
        """A lease at once when there is capacity and nobody waits (or capacity was kept for
        this session); otherwise a place in line, kept if the session already had one."""
        state = self.state
        if not state.lease_prefix:  # a limiter of an earlier release took the newest
            state.limits = request.limits
        else:
            hold = min(request.hold_seconds, MAX_HOLD_SECONDS)
            request = request.model_copy(update={"hold_seconds": hold})
        self._prune(now)
        kept = next(
            (x for x in state.leases if x.reserved and x.session_id == request.session_id), None
        )
        if kept is not None:  # counted from now: the request leaves now, not at the grant
            kept.reserved, kept.at, kept.tokens = False, now, request.tokens
            kept.until = now + request.hold_seconds
            return CapacityAnswer(lease=kept.lease)
        if request.spare:  # only from what nobody waits for
            if state.waiting or not self._room(now, request.tokens):
                return CapacityAnswer()
            return CapacityAnswer(
                lease=self._grant(
                    now, request.session_id, request.tokens, request.hold_seconds
                ).lease
            )
        queued = next((w for w in state.waiting if w.session_id == request.session_id), None)
        if queued is None and not state.waiting and self._room(now, request.tokens):
            state.granted += 1
            return CapacityAnswer(
                lease=self._grant(
                    now, request.session_id, request.tokens, request.hold_seconds
                ).lease
            )
        if queued is None:
            state.waited += 1
            state.waiting.append(
                Waiter(
                    session_id=request.session_id,
                    run_id=request.run_id,
                    tenant=request.tenant,
                    tokens=request.tokens,
                    hold_seconds=request.hold_seconds,
                    since=now,
                )
            )
        else:
            queued.run_id = request.run_id
        return CapacityAnswer(wait_seconds=self._patience())

    def release(self, now: float, release: CapacityRelease) -> None:
        state = self.state
        found = next((x for x in state.leases if x.lease == release.lease), None)
        if found is None and state.lease_prefix:  # no lease of ours: nobody's to give back
            return
        if found is not None and release.unused:
            state.leases.remove(found)
            return
        if found is not None:
            found.until = min(found.until, now)
            if release.tokens is not None:
                found.tokens = release.tokens
        if release.rate_limited:
            state.rate_limited += 1
            state.factor = max(MIN_FACTOR, state.factor / 2)
            pause = release.retry_after or DEFAULT_PAUSE_SECONDS
            state.paused_until = max(state.paused_until, now + pause)
        elif found is not None:
            state.factor = min(1.0, state.factor + RECOVERY_STEP)

    def forget(self, session_id: str) -> None:
        """A session the limiter could not tell (it ended): its kept capacity goes back."""
        for lease in self.state.leases:
            if lease.reserved and lease.session_id == session_id:
                lease.until = lease.at

    # --- the line ----------------------------------------------------------------------

    def serve(self, now: float) -> list[Waiter]:
        """Keep capacity for waiting sessions while there is capacity, tenants in turn."""
        state = self.state
        self._prune(now)
        served: list[Waiter] = []
        while state.waiting:
            chosen = self._next_waiter()
            if not self._room(now, chosen.tokens):
                break
            state.waiting.remove(chosen)
            state.last_tenant = chosen.tenant
            lease = self._grant(now, chosen.session_id, chosen.tokens, RESERVATION_SECONDS)
            lease.reserved = True
            served.append(chosen)
        return served

    def next_change(self, now: float) -> float | None:
        """When capacity may free for the line (``None``: nobody waits, or only a release
        can make space)."""
        state = self.state
        if not state.waiting:
            return None
        span = self._span()
        times = [x.at + span for x in state.leases] + [x.until for x in state.leases]
        times.append(state.paused_until)
        later = [t for t in times if t > now]
        return min(later) if later else None

    # --- internals ---------------------------------------------------------------------

    def _next_waiter(self) -> Waiter:
        """The first waiter of the tenant after the one served last (in order of the
        tenants' first places in line)."""
        state = self.state
        tenants: list[str] = []
        for waiter in state.waiting:
            if waiter.tenant not in tenants:
                tenants.append(waiter.tenant)
        turn = tenants[0]
        if state.last_tenant is not None:
            ordered = sorted(tenants)
            later = [t for t in ordered if t > state.last_tenant]
            turn = later[0] if later else ordered[0]
        return next(w for w in state.waiting if w.tenant == turn)

    def _grant(self, now: float, session_id: str, tokens: int, hold: float) -> Lease:
        state = self.state
        state.issued += 1
        number = str(state.issued)
        lease = Lease(
            lease=f"{state.lease_prefix}-{number}" if state.lease_prefix else number,
            session_id=session_id,
            at=now,
            until=now + hold,
            tokens=tokens,
        )
        state.leases.append(lease)
        return lease

    def _span(self) -> float:
        limits = self.state.limits
        return limits.window_seconds + limits.margin_seconds

    def _prune(self, now: float) -> None:
        span = self._span()
        self.state.leases = [x for x in self.state.leases if x.at + span > now or x.until > now]

    def _scaled(self, limit: int | None) -> int | None:
        return None if limit is None else max(1, math.floor(limit * self.state.factor))

    def _room(self, now: float, tokens: int) -> bool:
        state, limits = self.state, self.state.limits
        if now < state.paused_until:
            return False
        span = self._span()
        recent = [x for x in state.leases if x.at + span > now]
        requests = self._scaled(limits.requests_per_minute)
        if requests is not None and len(recent) >= requests:
            return False
        budget = self._scaled(limits.tokens_per_minute)
        used = sum(x.tokens for x in recent)
        if budget is not None and used and used + tokens > budget:
            return False  # (a request larger than the budget goes alone)
        concurrent = self._scaled(limits.concurrent_requests)
        active = sum(1 for x in state.leases if x.until > now)
        return concurrent is None or active < concurrent

    def _patience(self) -> float:
        """How long a waiting session waits for ``capacity_ready`` before it asks again."""
        return self._span() + RESERVATION_SECONDS

    def view(self, now: float) -> dict[str, object]:
        """What the limiter shows (its query): the line, the capacity taken, the rate."""
        state, span = self.state, self._span()
        return {
            "limits": state.limits.model_dump(exclude_none=True),
            "waiting": [{"session_id": w.session_id, "tenant": w.tenant} for w in state.waiting],
            "requests_in_window": sum(1 for x in state.leases if x.at + span > now),
            "tokens_in_window": sum(x.tokens for x in state.leases if x.at + span > now),
            "active": sum(1 for x in state.leases if x.until > now and not x.reserved),
            "factor": state.factor,
            "paused_until": state.paused_until,
            "granted_at_once": state.granted,
            "waited": state.waited,
            "rate_limited": state.rate_limited,
        }
