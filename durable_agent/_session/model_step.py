"""One model step: a model call and its retries as one step, with compaction (a summary
that stands in for older messages) first when the context budget asks for it.

Also what a step judges a reply by: rescuing an unusable reply (the spec's strategy:
correct and ask again, flush and ask afresh, or fail the turn), and the session's budget
(what its model calls have spent, against its limits)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

from durable_agent._contracts.boundary import (
    BudgetSignal,
    BudgetStatus,
    ModelSpend,
    arguments_problem,
)
from durable_agent._errors import Failure
from durable_agent._spec.document import AgentSpec, ModelPrice, ModelSpec, parse_structured_output
from durable_agent._wire.context import (
    ContextRules,
    compaction_until,
    context_overflow,
    shorter_context_rules,
    summary_message,
)
from durable_agent._wire.messages import (
    AssistantMessage,
    FlushMessage,
    RescueStrategy,
    ResqueMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from durable_agent._wire.transcript import Transcript

from .gate import error_result
from .protocol import CallModel, Pause, Summarise
from .state import BudgetState, RescueState, backoff, epoch_ms

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


# Rescuing unusable model replies (a ``resque`` message): telling
# an unusable turn apart, what the loop tells the model, and the spec's strategy applied
# (correct and ask again, flush and ask afresh, or fail the turn).

def unusable_reason(
    reply: AssistantMessage,
    tools: Collection[str],
    schema: dict[str, Any] | None,
    *,
    checked: bool = False,
    called: Collection[str] = (),
) -> str | None:
    """Why the loop cannot use this (non-error) turn, or ``None``: tool-call blocks that
    are not calls, a tool that does not exist, arguments that are not a JSON object, an
    empty answer, or an answer that does not match the output schema. ``checked``: its
    worker found every call's arguments a JSON object (a reply of thousands of calls is
    not parsed again in one workflow task); ``called``: the tools it calls, when known."""
    if reply.malformed_tool_calls:
        raw = reply.malformed_tool_calls[0][:200]
        return f"tool-call blocks that could not be read as calls: {raw}"
    calls = reply.tool_calls or []
    if checked and called and all(name in tools for name in called):
        calls = []  # (thousands: every tool known, every call's arguments checked)
    for call in calls:
        name = call.function.name
        if name not in tools:
            available = ", ".join(sorted(tools)) or "none"
            return f"it called a tool that does not exist: {name} (available: {available})"
        problem = None if checked else arguments_problem(call.function.arguments)
        if problem is not None:
            return f"the arguments of its {name} call {problem}"
    if reply.tool_calls:
        return None
    if not reply.content.strip() and reply.refusal is None:
        return "its answer was empty"
    if schema is not None:
        problem = parse_structured_output(reply.content, schema).error
        if problem:
            return f"its answer does not match the output schema: {problem}"
    return None


#: Finish reasons of an answer that stopped before it was complete.
TRUNCATED = frozenset({"length", "content_filter"})


def truncated_reason(reply: AssistantMessage) -> str | None:
    """Why an answer (no calls) is not complete, or ``None``."""
    if reply.tool_calls or reply.is_error or reply.finish_reason not in TRUNCATED:
        return None
    return f"its answer stopped before it was complete (finish_reason {reply.finish_reason})"


def continue_text(reason: str) -> str:
    """What the model reads after a cut answer (``stop.on_truncated`` ``continue``)."""
    return (
        f"Your last answer was cut off: {reason}. Continue it exactly where it stopped, "
        "without repeating what you already wrote."
    )


def corrective_text(reason: str) -> str:
    """What the model reads after an unusable turn (strategy ``correct``)."""
    return (
        f"Your last reply could not be used: {reason}. Reply again: call only the tools "
        "you were given, with a JSON object of arguments, or answer in the required format."
    )


def not_run_results(reply: AssistantMessage, reason: str) -> list[ToolMessage]:
    """Results for the calls of an unusable turn that the loop does not run (strategies
    ``flush`` and ``fail``): the array stays paired. They carry the reply's time."""
    stamp = {"timestamp": reply.timestamp, "mode": "tool"}
    return [
        error_result(
            call,
            f"Error calling '{call.function.name}': not run, the turn could not be used ({reason})",
        ).model_copy(update=stamp)
        for call in reply.tool_calls or ()
    ]


class Rescue:
    """Applies the spec's rescue strategy to the array and its slice of the carried
    state. Each method answers why the turn must end instead (strategy ``fail``, or
    attempts spent); otherwise the model is asked again, or (``correct`` with calls to
    run) the calls run first and ``after_tools`` says why the rescue follows them."""

    def __init__(self, spec: AgentSpec, state: RescueState, messages: Transcript) -> None:
        self.spec = spec
        self.state = state
        self.messages = messages

    def unusable(self, reply: AssistantMessage, reason: str) -> str | None:
        """An unusable turn joins the array; with ``correct`` and attempts left its calls
        run as usual (the model reads their errors) and the rescue follows their results;
        otherwise its calls get results saying they did not run, and the rescue is now."""
        state = self.state
        self.messages.join(reply)
        attempts_left = state.attempts < self.spec.rescue.max_attempts
        if reply.tool_calls and attempts_left and self.spec.rescue.strategy == "correct":
            state.after_tools = reason
            return None
        self.messages.join_all(not_run_results(reply, reason))
        return self.rescue(reason, reply.timestamp)

    def truncated(self, reply: AssistantMessage, reason: str) -> str | None:
        """A cut answer joins the array and the model is asked to go on (``correct``
        with the words for it), while attempts are left."""
        self.messages.join(reply)
        return self.rescue(reason, reply.timestamp, "correct", continue_text(reason))

    def rescue(
        self,
        reason: str,
        at: int | None,
        strategy: RescueStrategy | None = None,
        text: str | None = None,
    ) -> str | None:
        """Record the rescue step and apply the strategy (the spec's unless given;
        ``fail`` once attempts are out)."""
        state = self.state
        state.attempts += 1
        attempt = state.attempts
        strategy = strategy or self.spec.rescue.strategy
        if attempt > self.spec.rescue.max_attempts:
            strategy = "fail"
        content = (text or corrective_text(reason)) if strategy == "correct" else reason
        self.messages.join(
            ResqueMessage(
                content=content,
                reason=reason,
                strategy=strategy,
                attempt=attempt,
                mode="tool",
                timestamp=at,
            )
        )
        if strategy == "fail":
            tries = self.spec.rescue.max_attempts
            return (
                f"the model's reply could not be used: {reason}. Send the message again (a "
                f"later reply may do), allow more corrections (rescue.max_attempts, now "
                f"{tries}), or use a model that keeps to the tools' and the answer's schemas"
            )
        if strategy == "flush":
            latest = self._latest_user_message()
            self.messages.join(FlushMessage(by="rescue", reason=reason, mode="tool", timestamp=at))
            if latest is not None:  # asked again, afresh (a message of its own: its own id)
                again: dict[str, Any] = {"mode": "tool", "timestamp": at}
                if self.messages.ids:
                    again.update(id=None, given_id=None)
                self.messages.join(latest.model_copy(update=again))
        return None

    @property
    def calls_first(self) -> bool:
        """The unusable turn's calls run before its rescue (``correct`` with calls)."""
        return self.state.after_tools is not None

    def new_reply(self) -> None:
        """A new reply is asked for: its attempts start at none."""
        self.state.attempts = 0

    def take_after_tools(self) -> str | None:
        """Why a rescue follows the batch that just finished (``None``: none does)."""
        reason, self.state.after_tools = self.state.after_tools, None
        return reason

    def _latest_user_message(self) -> UserMessage | None:
        for message in reversed(self.messages):
            if isinstance(message, UserMessage) and message.blocked is None:
                return message
        return None


# A session's budget: what its model calls (and its sub-agents' and tools' model calls)
# have spent, against the spec's limits and the limits a person set since.

class Budget:
    """Counts usage and cost into its slice of the carried state and says when a limit
    is reached."""

    def __init__(self, spec: AgentSpec, state: BudgetState) -> None:
        self.spec = spec
        self.state = state
        self.prices: dict[str, ModelPrice] = {}
        """The worker's prices of the spec's unpriced models (from admission)."""

    def price_of(self, model: ModelSpec) -> ModelPrice | None:
        return model.price or self.prices.get(model.name)

    def change_problem(self, request: BudgetSignal) -> str | None:
        """Why ``set_budget`` cannot take ``request``; ``None`` once it was taken."""
        if request.max_total_tokens is None and request.max_cost_usd is None:
            return "set_budget: no limit given"
        if request.max_cost_usd is not None and self.price_of(self.spec.model) is None:
            return "set_budget: max_cost_usd needs a price for the model (spec or worker)"
        old = self.state.limits or BudgetSignal()
        self.state.limits = BudgetSignal(
            max_total_tokens=request.max_total_tokens or old.max_total_tokens,
            max_cost_usd=request.max_cost_usd or old.max_cost_usd,
        )
        return None

    def raises(self, request: BudgetSignal) -> bool:
        """Whether ``request`` lets the session spend more than the limits in force."""
        now = self.limits()
        pairs = [
            (request.max_total_tokens, now.max_total_tokens),
            (request.max_cost_usd, now.max_cost_usd),
        ]
        return any(new is not None and old is not None and new > old for new, old in pairs)

    def limits(self) -> BudgetSignal:
        """The limits in force: a person's, else the spec's."""
        stop, override = self.spec.stop, self.state.limits or BudgetSignal()
        return BudgetSignal(
            max_total_tokens=override.max_total_tokens or stop.max_total_tokens,
            max_cost_usd=override.max_cost_usd or stop.max_cost_usd,
        )

    def spent(self) -> str | None:
        """Why the budget allows no further model call, if it does not."""
        limits, state = self.limits(), self.state
        if (
            limits.max_total_tokens is not None
            and state.usage.total_tokens >= limits.max_total_tokens
        ):
            return (
                f"token budget spent: {state.usage.total_tokens} of "
                f"{limits.max_total_tokens} tokens"
            )
        if limits.max_cost_usd is not None and state.cost_usd >= limits.max_cost_usd:
            return f"cost budget spent: ${state.cost_usd:.4f} of ${limits.max_cost_usd:.4f}"
        return None

    def count(self, usage: Usage | None, price: ModelPrice | None, by: str) -> None:
        """Add one reply's usage (and its cost at ``price``, the answering model's), to
        the session's totals and to ``by``'s (a model's name, or a tool's)."""
        if usage is None:
            return
        if not usage.total_tokens:
            usage = usage.model_copy(
                update={"total_tokens": usage.prompt_tokens + usage.completion_tokens}
            )
        self.state.usage = self.state.usage + usage
        cost = None
        if price is not None:
            cost = price.cost_usd(usage)
            self.state.cost_usd += cost
        was = self.state.spend.get(by) or ModelSpend()
        spent = None if cost is None and was.cost_usd is None else (was.cost_usd or 0) + (cost or 0)
        self.state.spend[by] = ModelSpend(
            calls=was.calls + 1, usage=was.usage + usage, cost_usd=spent
        )

    @property
    def usage(self) -> Usage:
        return self.state.usage

    @property
    def spend(self) -> dict[str, ModelSpend]:
        """What the session spent, by model (and by tool, for sub-agents)."""
        return self.state.spend

    def status(self) -> BudgetStatus | None:
        limits = self.limits()
        if limits.max_total_tokens is None and limits.max_cost_usd is None:
            return None
        return BudgetStatus(
            max_total_tokens=limits.max_total_tokens,
            max_cost_usd=limits.max_cost_usd,
            total_tokens=self.state.usage.total_tokens,
            cost_usd=self.state.cost_usd if self.spec.model.price is not None else None,
        )
