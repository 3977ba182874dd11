"""An MCP server built with the official SDK, for the tests: ``python -m
tests.support.mcp_notes_server stdio`` or ``... http PORT`` (streamable HTTP on 127.0.0.1).
It writes each note with the idempotency key the call carried to ``NOTES_LEDGER``."""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("notes")


@server.tool()
def add_note(text: str, ctx: Context) -> str:
    """Keep a note."""
    meta = ctx.request_context.meta or {}
    key = dict(meta).get("durable_agent/idempotency_key", "none")
    with open(os.environ["NOTES_LEDGER"], "a") as ledger:
        ledger.write(f"{key} {text}\n")
    return f"noted: {text}"


@server.tool()
async def slow_note(text: str, ctx: Context) -> str:
    """Keep a note, slowly; once per idempotency key, however often it is asked."""
    meta = ctx.request_context.meta or {}
    key = dict(meta).get("durable_agent/idempotency_key", "none")
    ledger = anyio.Path(os.environ["NOTES_LEDGER"])
    done = (await ledger.read_text()).splitlines() if await ledger.exists() else []
    if any(line.startswith(f"{key} ") for line in done):
        return f"noted: {text}"  # a retry of a call that took effect: same answer
    await _append(ledger, f"start {key}\n")
    await anyio.sleep(3)
    await _append(ledger, f"{key} {text}\n")
    return f"noted: {text}"


async def _append(ledger: anyio.Path, line: str) -> None:
    async with await ledger.open("a") as f:
        await f.write(line)


@server.tool()
def broken(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot: {reason}")


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
