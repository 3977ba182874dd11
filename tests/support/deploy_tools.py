"""A tool for the deploy tests: it notes its start in ``$DEPLOY_LEDGER``, waits until
``$DEPLOY_RELEASE`` exists (the test lets it go once the worker is stopping), then
notes its end; each run of it is a line pair in the ledger."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from durable_agent import tool


def _note(line: str) -> None:
    with Path(os.environ["DEPLOY_LEDGER"]).open("a") as ledger:
        ledger.write(line + "\n")


@tool
async def migrate(table: str) -> str:
    """Migrate a table (slow: waits for the test's word)."""
    _note(f"start {table}")
    release = Path(os.environ["DEPLOY_RELEASE"])
    # the word comes from another process, as a file: there is no event here to wait on
    while not release.exists():  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    _note(f"done {table}")
    return f"{table} migrated"
