"""How one model call is delivered: what went wrong with an attempt in, what to do next out.

A model call can come back without a reply for reasons that are not the model's: the
worker lacks the session's model setup, the endpoint has no capacity yet, the workers'
transcript store lost what the call pointed at, a worker new to the session says what
it lacks, or the store lost the reply before its pages were read. Each has its rule
here: send again (with the setup, or with the whole transcript), wait for capacity, or
give up with a reason a person can act on. The workflow only carries the answers out.

Nothing here imports temporalio, reads a clock or does I/O, so every rule is tested in
milliseconds (tests/session/test_delivery.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from durable_agent._failures import Failure
from durable_agent._wire._messages import Usage

from ._events import ModelFailure

#: Re-sends of one model call's transcript before the session fails: a store that loses
#: it again at once is not shared by the workers (or not kept), and retrying cannot help.
MAX_STORE_REFILLS = 2


# --- what an attempt ran into --------------------------------------------------------


@dataclass(frozen=True)
class Failed:
    """The attempt failed: its failure type (``None``: not one the worker named, such as a
    timeout), its words, when to try again, and the details the worker attached."""

    kind: str | None
    text: str
    retry_after: timedelta | None = None
    details: tuple[Any, ...] = ()


@dataclass(frozen=True)
class Lacks:
    """A worker new to the session answered what it lacks: ``setup``, ``transcript``."""

    lacks: tuple[str, ...]


@dataclass(frozen=True)
class PagesLost:
    """The reply came, but reading its pages of calls failed (``failed``); most often the
    store lost the reply first (a pruned store, a ``memory:`` one whose worker
    restarted). The model was paid for it (``usage``)."""

    failed: Failed
    usage: Usage | None


Trouble = Failed | Lacks | PagesLost


# --- what to do next -----------------------------------------------------------------


@dataclass(frozen=True)
class SendAgain:
    """Make the call again; ``refill_store``: send the whole transcript inline first, for
    the store lost it. The next attempt carries the setup if ``Delivery.setup_inline``."""

    refill_store: bool = False


@dataclass(frozen=True)
class WaitForCapacity:
    """Wait until the endpoint's limiter keeps capacity for the call (at most ``patience``
    seconds), then send again; no attempt of the model was used."""

    endpoint: str
    patience: float


@dataclass(frozen=True)
class GiveUp:
    """The call fails: the Session decides what the turn does about it."""

    failure: ModelFailure


Decision = SendAgain | WaitForCapacity | GiveUp


@dataclass
class Delivery:
    """One model call's attempts. ``setup_known``: the workers are taken to hold the
    session's model setup, so an attempt names it by digest instead of carrying it."""

    setup_known: bool
    refills: int = 0
    """Times the call's transcript (or its reply) was lost by the store and sent again."""
    waited: bool = False
    """The call has waited for capacity: the worker lets it in before calls that did not."""
    unbilled: list[Usage] = field(default_factory=list)
    """Tokens of replies paid for and lost: the turn still counts them."""

    @property
    def setup_inline(self) -> bool:
        """The next attempt carries the model setup (the workers may not hold it)."""
        return not self.setup_known

    def delivered(self) -> None:
        """The reply came: the workers hold the setup now."""
        self.setup_known = True

    def after(self, trouble: Trouble) -> Decision:
        """What to do after an attempt ran into ``trouble``."""
        match trouble:
            case Lacks():
                return self._lacks(trouble.lacks)
            case PagesLost():
                lost = trouble.failed.kind == Failure.TRANSCRIPT_UNKNOWN
                if not lost or self.refills >= MAX_STORE_REFILLS:
                    return give_up(trouble.failed)
                # the reply was billed: the turn counts it, and the model is asked again
                self.refills += 1
                if trouble.usage is not None:
                    self.unbilled.append(trouble.usage)
                return SendAgain()
            case Failed():
                return self._failed(trouble)

    def _failed(self, failed: Failed) -> Decision:
        if failed.kind == Failure.MODEL_SETUP_UNKNOWN and self.setup_known:
            self.setup_known = False  # this worker lacks it: send it
            return SendAgain()
        if failed.kind == Failure.CAPACITY_WAIT:
            self.waited = True
            return WaitForCapacity(str(failed.details[0]), float(failed.details[1]))
        if failed.kind == Failure.TRANSCRIPT_UNKNOWN and self.refills < MAX_STORE_REFILLS:
            self.refills += 1
            return SendAgain(refill_store=True)
        return give_up(failed)

    def _lacks(self, lacks: tuple[str, ...]) -> Decision:
        # what was sent inline and is lacked anyway was not kept where the next worker
        # looks: sending it once more cannot help
        if ("setup" in lacks and not self.setup_known) or (
            "transcript" in lacks and self.refills >= MAX_STORE_REFILLS
        ):
            return GiveUp(
                ModelFailure(
                    Failure.TRANSCRIPT_UNKNOWN,
                    f"a worker lacks the session's {' and '.join(lacks)} after it was "
                    "sent: do all workers share one transcript store?",
                )
            )
        if "setup" in lacks:
            self.setup_known = False
        refill = "transcript" in lacks
        if refill:
            self.refills += 1
        return SendAgain(refill_store=refill)


def give_up(failed: Failed) -> GiveUp:
    """Fail the call with the worker's words; a store that lost the transcript again is
    most often not shared by the workers, and the words say what to check."""
    text = failed.text
    if failed.kind == Failure.TRANSCRIPT_UNKNOWN:
        text += " (the transcript store lost it again: do all workers share one?)"
    return GiveUp(ModelFailure(failed.kind, text, failed.retry_after))
