"""The ``durable-agent`` command: one module per group of subcommands; :func:`main` is the
entry point.

Its modules:

- ``main``: the parser and the dispatch of every subcommand.
- ``args``: arguments shared with ``worker.py``: the server, the worker, the spec to run.
- ``worker``: ``durable-agent worker``: a worker process.
- ``serve``: ``durable-agent serve``: the HTTP gateway and its console.
- ``demo``: ``durable-agent demo``: everything in one process tree.
- ``follow``: following a session on a terminal.
- ``render``: messages and status as a terminal shows them, and the message log.
- ``decisions``: approving, denying and steering a session.
- ``branches``: ``fork`` and ``diff``, and sessions as a tree of branches.
- ``trace``: ``durable-agent trace``: a session's timeline, as text or HTML.
- ``evals``: ``durable-agent eval`` and ``replay``.
- ``schedules``: ``durable-agent schedule``.
- ``versions``: ``durable-agent versions``: worker builds and the sessions on them."""

from __future__ import annotations

from typing import NoReturn


def main() -> NoReturn:
    """Run the command (its modules are imported on call: ``import durable_agent._cli``
    stays quick)."""
    from .main import main as run

    run()


__all__ = ["main"]
