"""The rolling-deploy benchmark's tool: it takes a while, and notes each start and end
of each call (by its idempotency key) in ``$BENCH_DEPLOY_LEDGER``, so a call that ran
twice shows as two starts."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from durable_agent import ToolContext, tool


def _note(line: str) -> None:
    with Path(os.environ["BENCH_DEPLOY_LEDGER"]).open("a") as ledger:
        ledger.write(line + "\n")


@tool
async def rebuild_index(name: str, ctx: ToolContext) -> str:
    """Rebuild a search index (takes a few seconds)."""
    _note(f"start {ctx.idempotency_key}")
    await asyncio.sleep(float(os.environ.get("BENCH_DEPLOY_TOOL_SECONDS", "3")))
    _note(f"done {ctx.idempotency_key}")
    return f"index {name} rebuilt"
