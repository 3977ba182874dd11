"""A summary is billed at the price of the model that wrote it (``context.summary_model``),
under its name, not at the price of the model the session talks to; and a cost budget
needs a price for that model before the session starts."""

from __future__ import annotations

from typing import Any

import pytest

from durable_agent._session import CallModel, Summarise
from durable_agent._session.protocol import Admitted
from durable_agent._spec.document import AgentSpec, ModelPrice
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, Usage, UserMessage
from durable_agent.capabilities import Capabilities
from durable_agent.capabilities._admission import admission_problems, registered_prices
from durable_agent.testing import assistant_text
from tests.support.session_steps import Stepper

CHEAP = ModelPrice(input_per_million=1, output_per_million=1)
PRICEY = ModelPrice(input_per_million=1000, output_per_million=1000)
SPEC = AgentSpec.model_validate(
    {
        "model": {
            "name": "cheap",
            "context": {
                "budget_tokens": 200,
                "chars_per_token": 4,
                "when_over": "compact",
                "summary_model": "pricey",
            },
        },
        "stop": {"max_cost_usd": 100},
    }
)


def test_a_summary_is_billed_at_its_writers_price_under_its_name() -> None:
    history: list[UserMessage | AssistantMessage] = []
    for k in range(30):
        history += [UserMessage(content=f"question {k} " * 5), AssistantMessage(content="ok " * 20)]
    summary = AssistantMessage(
        content="thirty questions, each answered ok",
        usage=Usage(prompt_tokens=1000, completion_tokens=100, total_tokens=1100),
    )
    answer = assistant_text("the answer", usage=Usage(prompt_tokens=10, completion_tokens=1))

    def model(body: dict[str, Any]) -> AssistantMessage:  # the summary is asked of pricey
        return summary if body["model"] == "pricey" else answer

    driver = Stepper(SPEC, Registry(), model)
    session = driver.open("and now?", history=history)
    prices = registered_prices(SPEC, Capabilities(prices={"cheap": CHEAP, "pricey": PRICEY}))
    assert prices == {"cheap": CHEAP, "pricey": PRICEY}
    session.handle(Admitted(prices), driver.clock)
    driver.step_until(Summarise)
    driver.step_until(CallModel)
    spend = session.view.status().spend
    assert spend["pricey"].usage.prompt_tokens == 1000
    assert spend["pricey"].cost_usd == pytest.approx(1100 * 1000 / 1e6)
    assert spend["cheap"].usage.prompt_tokens == 10
    assert spend["cheap"].cost_usd == pytest.approx(11 / 1e6)


async def test_a_cost_budget_needs_a_price_for_the_summary_model() -> None:
    priced = Capabilities(prices={"cheap": CHEAP, "pricey": PRICEY})
    unpriced = Capabilities(prices={"cheap": CHEAP})
    assert await admission_problems(SPEC, priced, "q", Registry()) == []
    [problem] = await admission_problems(SPEC, unpriced, "q", Registry())
    assert "context.summary_model" in problem and "'pricey'" in problem
