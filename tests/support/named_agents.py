"""Agents a worker loads with ``--agents tests.support.named_agents`` (the CLI and the
gateway load them too, to start one by name). The model is the test's scripted one,
whose URL the test passes in the environment, as an owner's module would read its own
configuration."""

from __future__ import annotations

import os

from pydantic import BaseModel

from durable_agent import Agent, ModelSpec
from durable_agent.capabilities import ProviderEndpoint
from tests.support.cli_tools import get_time

MODEL = ModelSpec(
    name="scripted-model",
    endpoint=ProviderEndpoint(base_url=os.environ["NAMED_AGENTS_MODEL_URL"], api_key_env=None),
    max_attempts=1,
)


class Clock(BaseModel):
    city: str
    time: str


clock = Agent(
    name="clock",
    model=MODEL,
    instructions="Tell the time with get_time.",
    tools=[get_time],
    output_type=Clock,
)
