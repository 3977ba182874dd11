"""One model step: a model call and its retries as one step, with compaction (a summary
that stands in for older messages) first when the context budget asks for it."""

from __future__ import annotations

from datetime import datetime, timedelta

from durable_agent._failures import Failure
from durable_agent._spec._spec import ModelSpec
from durable_agent._wire._context import (
    ContextRules,
    compaction_until,
    context_overflow,
    shorter_context_rules,
    summary_message,
)
from durable_agent._wire._messages import AssistantMessage
from durable_agent._wire._transcript import Transcript

from ._commands import CallModel, Pause, Summarise
from ._loop_rules import backoff, epoch_ms

#: Shorter requests one step tries after "context too long" before the turn ends.
SHORTENINGS_AT_MOST = 3


class ModelStep:
    """Whether a step is under way, the pause before its next attempt, and the summary
    it is making; the Session asks it for the step's next command."""

    def __init__(self, messages: Transcript) -> None:
        self.messages = messages
        self.calling = False
        self.failures = 0
        """The model's own failures in this step (lost workers are not counted)."""
        self.pause: timedelta | None = None
        self.summarising: int | None = None
        """Compaction in progress: the summary is to stand in for this many messages."""
        self.hop = 0
        """Which model of the chain the step calls: 0 the model, then its fallbacks."""
        self.shortened_context: ContextRules | None = None
        """Tighter context rules after the model said the request was too long."""
        self.shortenings = 0

    def begin(self) -> None:
        self.calling, self.failures, self.hop = True, 0, 0
        self.shortened_context, self.shortenings = None, 0

    def overflowed(self, kind: str | None, text: str) -> bool:
        """The model refused the request as longer than its context, and a shorter one
        is still to try (half of it, then a quarter, at most ``SHORTENINGS_AT_MOST`` times)."""
        return (
            kind == Failure.PROVIDER_ERROR
            and context_overflow(text)
            and self.shortenings < SHORTENINGS_AT_MOST
        )

    def shorten_request(self, model: ModelSpec) -> None:
        """The next attempt sends half of what this one did, the oldest left out."""
        self.shortened_context = shorter_context_rules(
            self.messages, self.shortened_context or model.context, 0.5
        )
        self.shortenings += 1

    def stop(self) -> None:
        """The step is over (answered, failed for good, or cancelled)."""
        self.calling, self.pause, self.summarising = False, None, None

    def command(self, turn: int, model: ModelSpec) -> Pause | Summarise | CallModel:
        """The pause before another attempt, the summary to make first, or the call."""
        if self.pause is not None:
            delay, self.pause = self.pause, None
            return Pause(delay)
        if self.summarising is None:
            self.summarising = compaction_until(self.messages, model.context)
        if self.summarising is not None:
            return Summarise(turn=turn, until=self.summarising)
        return CallModel(turn=turn)

    def summarised(self, summary: AssistantMessage, now: datetime) -> None:
        """The summary stands in for earlier messages from now on (they stay)."""
        assert self.summarising is not None
        self.messages.join(summary_message(summary.content, self.summarising, epoch_ms(now)))
        self.summarising, self.failures = None, 0

    def fell_back(self, kind: str | None, fallbacks: int) -> bool:
        """Whether the step moves on to the next model of the chain: after a failure
        another model may not share (the model's own, or a timeout), while one is left."""
        if kind not in (Failure.MODEL_ATTEMPT_FAILED, None) or self.hop >= fallbacks:
            return False
        self.hop, self.failures, self.pause = self.hop + 1, 0, None
        return True

    def retried(self, kind: str | None, retry_after: timedelta | None, model: ModelSpec) -> bool:
        """Whether a failed attempt is tried again (after a pause: ``Retry-After``, else
        the model's backoff): only the model's own failures, while attempts are left."""
        if kind != Failure.MODEL_ATTEMPT_FAILED or self.failures + 1 >= model.max_attempts:
            return False
        self.failures += 1
        self.pause = retry_after or backoff(
            model.initial_retry_seconds, model.max_retry_seconds, self.failures
        )
        return True
