"""A session's budget: what its model calls (and its sub-agents' and tools' model calls)
have spent, against the spec's limits and the limits a person set since."""

from __future__ import annotations

from durable_agent._contracts._contracts import BudgetSignal, BudgetStatus, ModelSpend
from durable_agent._spec._spec import AgentSpec, ModelPrice, ModelSpec
from durable_agent._wire._messages import Usage

from ._state import BudgetState


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
