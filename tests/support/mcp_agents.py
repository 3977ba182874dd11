"""Agents for the MCP compatible endpoint's tests (``durable-agent mcp-serve --agents``): their
model is the scripted provider the test runs, named by ``MCP_DOOR_MODEL_URL``."""

from __future__ import annotations

import os

from pydantic import BaseModel

from durable_agent import Agent
from durable_agent._spec.document import ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint

URL = os.environ.get("MCP_DOOR_MODEL_URL", "http://127.0.0.1:9/v1")
MODEL = ModelSpec(
    name="scripted",
    endpoint=ProviderEndpoint(base_url=URL, api_key_env=None),
    stream=False,
    max_attempts=1,
)


class Timing(BaseModel):
    city: str
    local_time: str


clock = Agent(
    name="clock",
    description="Tells the local time in a city, as a record.",
    model=MODEL,
    instructions="Look the time up with get_time, then answer with the record.",
    tools=["get_time"],
    output_type=Timing,
)

echo = Agent(name="echo", description="Says the task back.", model=MODEL)
