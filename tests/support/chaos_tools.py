"""Tools for the chaos test, loaded by worker processes that get killed.

Every effect goes to an append-only ledger (fsync'd), keyed by the call's idempotency
key; a call that already took effect returns the recorded result instead of acting
again. That is the pattern durable-agent's idempotency key exists for.
"""

from __future__ import annotations

import asyncio
import os

from durable_agent._spec.tools import ToolContext
from durable_agent._tools.functions import tool


def _append(line: str) -> None:
    with open(os.environ["CHAOS_LEDGER"], "a") as ledger:
        ledger.write(line + "\n")
        ledger.flush()
        os.fsync(ledger.fileno())


def _recorded(key: str) -> str | None:
    try:
        with open(os.environ["CHAOS_LEDGER"]) as ledger:
            for line in ledger:
                if line.startswith(f"effect {key} "):
                    return line.rstrip("\n").split(" ", 2)[2]
    except FileNotFoundError:
        pass
    return None


async def _once(key: str, act: str) -> str:
    _append(f"start {key}")
    done = _recorded(key)
    if done is not None:
        return done
    await asyncio.sleep(0.3)  # the effect takes a while: kills land in the middle
    _append(f"effect {key} {act}")
    return act


@tool
async def transfer(account: str, amount: int, ctx: ToolContext) -> str:
    """Move money to an account."""
    return await _once(ctx.idempotency_key, f"moved {amount} to {account}")


@tool(approval="always")
async def close_account(account: str, ctx: ToolContext) -> str:
    """Close an account (a person approves)."""
    return await _once(ctx.idempotency_key, f"closed {account}")


def effect_recorded(ctx: ToolContext) -> str | None:
    """`pay`'s effect check: the recorded result if the payment already happened."""
    return _recorded(ctx.idempotency_key)


@tool(check=effect_recorded)
async def pay(account: str, amount: int, ctx: ToolContext) -> str:
    """Pay an account. Not idempotent by itself: its check is what keeps a payment from
    being made twice when a worker dies after paying and before reporting it."""
    _append(f"start {ctx.idempotency_key}")
    await asyncio.sleep(1.5)
    act = f"paid {amount} to {account}"
    _append(f"effect {ctx.idempotency_key} {act}")
    await asyncio.sleep(float(os.environ.get("CHAOS_REPORT_DELAY", "0")))  # a slow report
    return act
