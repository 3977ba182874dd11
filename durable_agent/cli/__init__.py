"""The ``durable-agent`` command: one module per group of subcommands (arguments,
approvals, following a session, the trace); :func:`main` is the entry point."""

from __future__ import annotations

from typing import NoReturn


def main() -> NoReturn:
    """Run the command (imported on call: the worker imports ``cli.args`` alone)."""
    from durable_agent.cli.main import main as run

    run()
