"""Memory recall over 100,000 memories: the time one keyword recall takes (p50, p95 per
call, through the ``Memory`` kind's own call path) on SQLite and on a private
PostgreSQL server. Prints figures; asserts nothing. The target: p95 at most 20 ms.

The memories are spread over namespaces of 1,000 each (a user's memories over a long
time), their texts drawn from a vocabulary of 5,000 words; each recall asks three
words in one namespace."""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from durable_agent._spec.tools import ToolContext
from durable_agent.capabilities import Memory
from durable_agent.capabilities._memory import MemoryTool, Scope
from durable_agent.capabilities._memory_store import MemoryStore, Transaction, open_memory_store
from tests.support.postgres_server import running_postgres

PER_NAMESPACE = 1000


def vocabulary(size: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(size)]


async def fill(store: MemoryStore, count: int, words: list[str], rng: random.Random) -> int:
    namespaces = max(count // PER_NAMESPACE, 1)
    for n in range(namespaces):
        texts = [" ".join(rng.choices(words, k=12)) for _ in range(PER_NAMESPACE)]

        async def batch(tx: Transaction, n: int = n, texts: list[str] = texts) -> str:
            for k, text in enumerate(texts):
                await store.put(tx, f"users/u{n}", f"m{k}", text, tenant=f"u{n}")
            return "ok"

        await store.once(None, batch)
    return namespaces


async def measure(url: str, count: int, calls: int) -> dict[str, Any]:
    rng = random.Random(7)
    words = vocabulary(5000, rng)
    store = open_memory_store(url)
    started = time.perf_counter()
    namespaces = await fill(store, count, words, rng)
    filled = time.perf_counter() - started
    kind = Memory(store, {"notes": "users/{user}"})
    context = ToolContext(session_id="b", turn=1, slot=0, tool_call_id="c", idempotency_key="b")
    recall = MemoryTool(source="notes", tool="recall")
    times, hits = [], 0
    for call in range(calls):
        user = f"u{rng.randrange(namespaces)}"
        scope = Scope(user=user, tenant=user, session="b")
        query = " ".join(rng.choices(words, k=3))
        began = time.perf_counter()
        text, _ = await kind.serve(recall, {"query": query}, context, scope)
        times.append((time.perf_counter() - began) * 1000)
        hits += text != '{"memories": []}'
        del call
    await store.close()
    times.sort()
    return {
        "fill_s": filled,
        "p50": statistics.median(times),
        "p95": times[int(len(times) * 0.95) - 1],
        "hits": hits / calls,
    }


def line(store: str, row: dict[str, Any]) -> str:
    figures = f"{row['fill_s']:9.1f} {row['p50']:9.2f} {row['p95']:9.2f}"
    return f"{store:<10} {figures} {row['hits']:6.0%}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    print(
        f"keyword recall over {args.memories:,} memories, {args.calls} calls (target p95 <= 20 ms)"
    )
    print(f"{'store':<10} {'fill (s)':>9} {'p50 (ms)':>9} {'p95 (ms)':>9} {'found':>6}")
    if args.only in (None, "sqlite"):
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{Path(folder) / 'memory.sqlite'}"
            row = await measure(url, args.memories, args.calls)
            print(line("sqlite", row))
    if args.only in (None, "postgres"):
        with running_postgres() as url:
            row = await measure(url, args.memories, args.calls)
            print(line("postgres", row))


if __name__ == "__main__":
    asyncio.run(main())
