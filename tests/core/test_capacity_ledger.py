"""The limiter's book on its own (pure, clock given): requests and tokens over a sliding
window, concurrency, the line and its fairness between tenants, and what a 429 does."""

from __future__ import annotations

import pytest

from durable_agent._contracts.capacity import (
    MAX_HOLD_SECONDS,
    RECOVERY_STEP,
    RESERVATION_SECONDS,
    Ledger,
    LedgerState,
)
from durable_agent._spec.endpoints import (
    CapacityAnswer,
    CapacityRelease,
    CapacityRequest,
    ProviderLimits,
)


def ask(
    limits: ProviderLimits, session: str, tenant: str = "", tokens: int = 0, hold: float = 30
) -> CapacityRequest:
    return CapacityRequest(
        limits=limits,
        session_id=session,
        run_id=f"run-{session}",
        tenant=tenant,
        tokens=tokens,
        hold_seconds=hold,
    )


def test_requests_per_window_slide() -> None:
    limits = ProviderLimits(requests_per_minute=2, window_seconds=10, margin_seconds=1)
    ledger = Ledger(LedgerState())
    assert ledger.acquire(0, ask(limits, "a")).lease == "1"
    assert ledger.acquire(1, ask(limits, "b")).lease == "2"
    # in line, told to ask again after the window, its margin and a kept capacity's life
    waiting = ledger.acquire(2, ask(limits, "c"))
    assert waiting == CapacityAnswer(lease=None, wait_seconds=10 + 1 + RESERVATION_SECONDS)
    # nobody jumps the line, even when asking again
    assert ledger.acquire(3, ask(limits, "c")).lease is None
    assert [w.session_id for w in ledger.state.waiting] == ["c"]
    assert ledger.next_change(3) == 11  # the first grant leaves the window (10 + margin 1)
    assert ledger.serve(10.5) == []
    served = ledger.serve(11)
    assert [w.session_id for w in served] == ["c"]
    # the kept capacity is claimed by the session's next ask, counted from then
    claimed = ledger.acquire(11.2, ask(limits, "c"))
    assert claimed.lease == "3"
    assert ledger.acquire(11.5, ask(limits, "d")).lease is None  # b's and c's window
    assert ledger.next_change(11.5) == 12


def test_tokens_are_corrected_by_what_the_reply_cost() -> None:
    limits = ProviderLimits(tokens_per_minute=1_000, window_seconds=60)
    ledger = Ledger(LedgerState())
    first = ledger.acquire(0, ask(limits, "a", tokens=900))
    assert first.lease is not None
    assert ledger.acquire(1, ask(limits, "b", tokens=300)).lease is None
    ledger.release(2, CapacityRelease(lease=first.lease, tokens=200))
    assert [w.session_id for w in ledger.serve(2)] == ["b"]
    # a request larger than the whole budget goes alone, when nothing else counts
    alone = Ledger(LedgerState())
    assert alone.acquire(0, ask(limits, "big", tokens=5_000)).lease is not None


def test_concurrency_counts_leases_until_released_or_their_hold_ends() -> None:
    limits = ProviderLimits(concurrent_requests=1)
    ledger = Ledger(LedgerState())
    lease = ledger.acquire(0, ask(limits, "a", hold=30)).lease
    assert lease is not None
    assert ledger.acquire(1, ask(limits, "b")).lease is None
    assert ledger.next_change(1) == 30  # a lost worker's lease ends with its hold
    ledger.release(5, CapacityRelease(lease=lease))
    assert [w.session_id for w in ledger.serve(5)] == ["b"]
    # an unclaimed reservation holds the capacity; a session that cannot be told frees it
    assert ledger.acquire(6, ask(limits, "c")).lease is None
    ledger.forget("b")
    assert [w.session_id for w in ledger.serve(6)] == ["c"]


def test_the_line_serves_tenants_in_turn() -> None:
    limits = ProviderLimits(requests_per_minute=1, window_seconds=10, margin_seconds=0)
    ledger = Ledger(LedgerState())
    assert ledger.acquire(0, ask(limits, "seed", tenant="alice")).lease is not None
    for k in range(4):  # alice's burst is in line first
        ledger.acquire(1, ask(limits, f"a{k}", tenant="alice"))
    ledger.acquire(2, ask(limits, "b0", tenant="bob"))
    ledger.acquire(2, ask(limits, "b1", tenant="bob"))
    order = []
    for t in range(1, 7):
        served = ledger.serve(t * 10)
        order += [w.session_id for w in served]
        for waiter in served:
            ledger.acquire(t * 10, ask(limits, waiter.session_id, tenant=waiter.tenant))
    assert order == ["a0", "b0", "a1", "b1", "a2", "a3"]


def test_a_429_pauses_and_halves_then_successes_recover() -> None:
    limits = ProviderLimits(requests_per_minute=10, window_seconds=60)
    ledger = Ledger(LedgerState())
    lease = ledger.acquire(0, ask(limits, "a")).lease
    assert lease is not None
    ledger.release(1, CapacityRelease(lease=lease, rate_limited=True, retry_after=5))
    assert ledger.state.factor == 0.5 and ledger.state.paused_until == 6
    assert ledger.acquire(2, ask(limits, "b")).lease is None  # paused for everyone
    assert ledger.next_change(2) == 6
    assert [w.session_id for w in ledger.serve(6)] == ["b"]
    # five requests fit the halved window (the refused one counts): the sixth waits
    granted = [ledger.acquire(7, ask(limits, "b")).lease]
    granted += [ledger.acquire(7, ask(limits, f"c{k}")).lease for k in range(3)]
    assert None not in granted and ledger.acquire(7, ask(limits, "d")).lease is None
    for done in granted:
        assert done is not None
        ledger.release(8, CapacityRelease(lease=done, tokens=10))
    assert ledger.state.factor == pytest.approx(0.5 + 4 * RECOVERY_STEP)


def test_spare_leases_take_only_free_room_and_unused_ones_never_counted() -> None:
    limits = ProviderLimits(requests_per_minute=2, window_seconds=10)
    ledger = Ledger(LedgerState())
    spare = ask(limits, "spare").model_copy(update={"spare": True})
    first = ledger.acquire(0, spare).lease
    assert first is not None
    ledger.release(0.5, CapacityRelease(lease=first, unused=True))  # never taken
    assert ledger.acquire(1, ask(limits, "a")).lease is not None
    assert ledger.acquire(1, ask(limits, "b")).lease is not None  # the spare left no trace
    assert ledger.acquire(2, ask(limits, "c")).lease is None
    # no spare while someone waits in line, and a refused spare takes no place in it
    later = ledger.acquire(20, spare)
    assert later.lease is None and [w.session_id for w in ledger.state.waiting] == ["c"]


def test_a_bound_book_keeps_its_limits_names_leases_at_random_and_caps_a_hold() -> None:
    """A limiter whose id names its limits (its book has a lease prefix): an ask with
    other limits changes nothing, leases carry the prefix, a release naming no lease of
    its own (a 429 included) changes nothing, and no ask holds concurrency past an hour."""
    limits = ProviderLimits(concurrent_requests=1)
    ledger = Ledger(LedgerState(limits=limits, lease_prefix="f00d"))
    held = ledger.acquire(0, ask(ProviderLimits(concurrent_requests=9), "mallory", hold=1e9))
    assert ledger.state.limits == limits
    assert held.lease == "f00d-1"
    assert ledger.acquire(1, ask(limits, "victim")).lease is None  # one at a time
    for guess in ("1", "f00d", "f00d-2", "0"):
        ledger.release(2, CapacityRelease(lease=guess, rate_limited=True, unused=True))
    assert ledger.state.rate_limited == 0 and ledger.state.factor == 1.0
    assert ledger.acquire(3, ask(limits, "victim")).lease is None  # still held
    # the forged hold of a billion seconds counts for an hour: then the line moves
    assert ledger.serve(MAX_HOLD_SECONDS - 1) == []
    assert [w.session_id for w in ledger.serve(MAX_HOLD_SECONDS + 1)] == ["victim"]
