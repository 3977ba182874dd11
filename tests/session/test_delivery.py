"""How a model call is delivered, rule by rule, without a server: each way an attempt can
come back without a reply, what is done next, how often, and the words of giving up.
The workflow carries these answers out; the server tests that go through the same paths
(tests/temporal/test_store_outage.py, test_reply_pages.py, test_deploys.py,
tests/providers/test_provider_limits.py) and the recorded histories show it does."""

from __future__ import annotations

from datetime import timedelta

import pytest

from durable_agent._errors import Failure
from durable_agent._session import ModelFailure
from durable_agent._session.model_call import (
    MAX_STORE_REFILLS,
    Delivery,
    Failed,
    GiveUp,
    Lacks,
    PagesLost,
    SendAgain,
    WaitForCapacity,
)
from durable_agent._wire.messages import Usage

STORE_LOST = Failed(Failure.TRANSCRIPT_UNKNOWN, "the store lacks transcript abc")
USAGE = Usage(prompt_tokens=100, completion_tokens=20, total_tokens=120)


# --- a worker lacking the session's setup ----------------------------------------------


def test_a_worker_that_lacks_the_setup_is_sent_it_once() -> None:
    delivery = Delivery(setup_known=True)
    assert not delivery.setup_inline, "a known setup goes by digest"
    assert delivery.after(Failed(Failure.MODEL_SETUP_UNKNOWN, "no setup d1")) == SendAgain()
    assert delivery.setup_inline, "the next attempt carries the setup"
    delivery.delivered()
    assert not delivery.setup_inline, "after a reply the workers hold it"


def test_a_setup_sent_inline_and_still_unknown_gives_up_with_the_workers_words() -> None:
    delivery = Delivery(setup_known=False)
    decision = delivery.after(Failed(Failure.MODEL_SETUP_UNKNOWN, "no setup d1"))
    assert decision == GiveUp(ModelFailure(Failure.MODEL_SETUP_UNKNOWN, "no setup d1"))


# --- a wait for capacity ---------------------------------------------------------------


def test_no_capacity_waits_for_the_endpoint_then_sends_marked_as_having_waited() -> None:
    delivery = Delivery(setup_known=True)
    assert not delivery.waited
    full = Failed(Failure.CAPACITY_WAIT, "no capacity", details=("openai:tenant-a", 30))
    assert delivery.after(full) == WaitForCapacity("openai:tenant-a", 30.0)
    assert delivery.waited, "the worker lets a call that waited in first"


def test_waits_for_capacity_have_no_limit_and_use_no_refill() -> None:
    """Waiting uses no attempt of the model: a busy endpoint is waited for as long as it
    is busy (the turn's cancel ends it, which the workflow watches)."""
    delivery = Delivery(setup_known=True)
    full = Failed(Failure.CAPACITY_WAIT, "no capacity", details=("e", 1.5))
    for _ in range(50):
        assert delivery.after(full) == WaitForCapacity("e", 1.5)
    assert delivery.refills == 0
    assert delivery.after(STORE_LOST) == SendAgain(refill_store=True)


# --- a transcript store that lost what the call names ----------------------------------


def test_a_store_that_lost_the_transcript_is_refilled_up_to_the_limit() -> None:
    delivery = Delivery(setup_known=True)
    for _ in range(MAX_STORE_REFILLS):
        assert delivery.after(STORE_LOST) == SendAgain(refill_store=True)
    decision = delivery.after(STORE_LOST)
    assert isinstance(decision, GiveUp)
    assert decision.failure.kind == Failure.TRANSCRIPT_UNKNOWN
    assert decision.failure.text == (
        "the store lacks transcript abc "
        "(the transcript store lost it again: do all workers share one?)"
    )


# --- a worker new to the session ------------------------------------------------------


def test_a_new_worker_lacking_the_setup_is_sent_it() -> None:
    delivery = Delivery(setup_known=True)
    assert delivery.after(Lacks(("setup",))) == SendAgain(refill_store=False)
    assert delivery.setup_inline


def test_a_new_worker_lacking_the_transcript_gets_it_refilled() -> None:
    delivery = Delivery(setup_known=True)
    assert delivery.after(Lacks(("setup", "transcript"))) == SendAgain(refill_store=True)
    assert delivery.setup_inline and delivery.refills == 1


def test_a_worker_lacking_the_setup_it_was_just_sent_gives_up() -> None:
    delivery = Delivery(setup_known=False)
    decision = delivery.after(Lacks(("setup",)))
    assert decision == GiveUp(
        ModelFailure(
            Failure.TRANSCRIPT_UNKNOWN,
            "a worker lacks the session's setup after it was sent: "
            "do all workers share one transcript store?",
        )
    )


def test_a_worker_lacking_the_transcript_past_the_limit_gives_up() -> None:
    """Refills of any kind (a store that lost it, a new worker, lost pages) share one
    count: a store that keeps losing what it was given is not shared."""
    delivery = Delivery(setup_known=True)
    assert delivery.after(STORE_LOST) == SendAgain(refill_store=True)
    assert delivery.after(Lacks(("transcript",))) == SendAgain(refill_store=True)
    decision = delivery.after(Lacks(("transcript",)))
    assert isinstance(decision, GiveUp)
    assert decision.failure.text == (
        "a worker lacks the session's transcript after it was sent: "
        "do all workers share one transcript store?"
    )


# --- a reply whose pages were lost -----------------------------------------------------


def test_a_reply_whose_pages_were_lost_asks_again_and_keeps_its_tokens() -> None:
    delivery = Delivery(setup_known=True)
    assert delivery.after(PagesLost(STORE_LOST, USAGE)) == SendAgain(refill_store=False)
    assert delivery.after(PagesLost(STORE_LOST, None)) == SendAgain(refill_store=False)
    assert delivery.unbilled == [USAGE], "the paid reply still counts in the turn"
    decision = delivery.after(PagesLost(STORE_LOST, USAGE))
    assert isinstance(decision, GiveUp), f"at most {MAX_STORE_REFILLS} times"
    assert decision.failure.kind == Failure.TRANSCRIPT_UNKNOWN
    assert delivery.unbilled == [USAGE]


def test_pages_that_fail_for_another_reason_give_up_at_once() -> None:
    delivery = Delivery(setup_known=True)
    broken = Failed(Failure.MODEL_SETUP_UNKNOWN, "odd", timedelta(seconds=3))
    decision = delivery.after(PagesLost(broken, USAGE))
    assert decision == GiveUp(
        ModelFailure(Failure.MODEL_SETUP_UNKNOWN, "odd", timedelta(seconds=3))
    )
    assert delivery.unbilled == [] and delivery.setup_known


# --- every other failure -----------------------------------------------------------------


@pytest.mark.parametrize(
    "failed",
    [
        Failed("RateLimited", "slow down", timedelta(seconds=7)),
        Failed(None, "the model call gave up after 600 s"),
        Failed(Failure.TRANSCRIPT_UNKNOWN, "x", timedelta(seconds=1)),
    ],
)
def test_other_failures_go_back_to_the_session_as_they_came(failed: Failed) -> None:
    delivery = Delivery(setup_known=True)
    delivery.refills = MAX_STORE_REFILLS
    decision = delivery.after(failed)
    assert isinstance(decision, GiveUp)
    assert decision.failure.kind == failed.kind
    assert decision.failure.text.startswith(failed.text)
    assert decision.failure.retry_after == failed.retry_after
