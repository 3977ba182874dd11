"""Tools for the log test: one fails naming what it was given, one echoes it."""

from __future__ import annotations

from durable_agent import tool


@tool(max_attempts=1)
def explode(name: str) -> str:
    """A tool that fails, naming what it was given."""
    raise RuntimeError(f"cannot explode {name}")


@tool
def echo(text: str) -> str:
    """Say it back."""
    return f"you said {text}"


@tool(approval="always")
def guarded(text: str) -> str:
    """A tool a person must approve first."""
    return f"done: {text}"
