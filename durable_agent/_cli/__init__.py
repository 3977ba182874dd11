"""The ``durable-agent`` command: one module per group of subcommands (arguments,
approvals, following a session, the trace, the worker, the demo); :func:`main` is the
entry point."""

from __future__ import annotations

from typing import NoReturn


def main() -> NoReturn:
    """Run the command (its modules are imported on call: ``import durable_agent._cli``
    stays quick)."""
    from .main import main as run

    run()


__all__ = ["main"]
