"""Tools a separately started worker loads with ``--tools tests.cli_tools``."""

from __future__ import annotations

from durable_agent.tools import tool


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    return {"NYC": "09:00", "Tokyo": "22:00"}.get(city, "unknown")


@tool(approval="always")
def wipe_cache(name: str) -> str:
    """Clear a cache (a person approves)."""
    return f"cache {name} cleared"
