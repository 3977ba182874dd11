"""The demo agent's tools: a lookup that runs in parallel, and an action a person approves."""

from __future__ import annotations

from durable_agent._spec._tool_policy import ToolContext
from durable_agent._tools._tool import tool

WEATHER = {
    "NYC": "72F and sunny",
    "London": "55F with light rain",
    "Paris": "64F and cloudy",
    "Tokyo": "68F and clear",
}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city (NYC, London, Paris or Tokyo)."""
    return WEATHER.get(city, f"no weather station for {city}")


@tool(approval="always")
def send_report(to: str, text: str, ctx: ToolContext) -> str:
    """Email a short report. A person approves every message before it goes out."""
    return f"report sent to {to} (message id {ctx.idempotency_key})"
