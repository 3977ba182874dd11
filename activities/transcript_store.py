"""Where workers keep transcripts: an in-process cache in front of a shared durable store.

A message is stored once, under the chain hash of the prefix it ends, with its parent's
hash; a prefix is read back by walking parents. Any worker sharing the store can serve
any session. Holds conversation content only: never keys or headers.

Store URLs: ``sqlite:///path/to/file`` (embedded default), ``postgresql://...``
(production), ``memory:`` (the cache alone: a worker restart forgets, and the
workflow re-sends the array once).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from durable_agent.messages import Message, parse_message
from durable_agent.transcript import EMPTY_HASH, canonical_json, chain_hash, content_hash

T = TypeVar("T")
Row = tuple[str, str, int, str]
"""(hash, parent hash, position, canonical message JSON)"""


class TranscriptBackend(Protocol):
    inline: bool
    """Fast and local enough to call on the event loop (no thread hop)."""

    def load(self, head: str) -> list[Row]: ...
    def save(self, rows: Sequence[Row]) -> None: ...
    def load_single(self, key: str) -> str | None: ...
    def save_single(self, key: str, message_json: str) -> None: ...
    def prune(self, older_than_seconds: float) -> int: ...
    def wipe(self) -> None: ...


def _complete_chain(rows: list[Row], head: str) -> list[str] | None:
    """The messages of ``head``'s prefix, or ``None`` if any ancestor is missing."""
    if not rows:
        return [] if head == EMPTY_HASH else None
    ordered = sorted(rows, key=lambda r: r[2])
    if ordered[0][1] != EMPTY_HASH or ordered[-1][0] != head or ordered[-1][2] != len(rows) - 1:
        return None
    return [r[3] for r in ordered]


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS transcript_messages (hash TEXT PRIMARY KEY, "
    "parent TEXT NOT NULL, position INTEGER NOT NULL, message TEXT NOT NULL, "
    "stored_at DOUBLE PRECISION NOT NULL)",
    "CREATE INDEX IF NOT EXISTS transcript_messages_stored_at ON transcript_messages (stored_at)",
    "CREATE TABLE IF NOT EXISTS single_messages (hash TEXT PRIMARY KEY, "
    "message TEXT NOT NULL, stored_at DOUBLE PRECISION NOT NULL)",
)
_WALK = """
WITH RECURSIVE chain(hash, parent, position, message) AS (
    SELECT hash, parent, position, message FROM transcript_messages WHERE hash = {p}
    UNION ALL
    SELECT t.hash, t.parent, t.position, t.message
    FROM transcript_messages t JOIN chain c ON t.hash = c.parent
)
SELECT hash, parent, position, message FROM chain
"""
_UPSERT = "ON CONFLICT (hash) DO UPDATE SET stored_at = excluded.stored_at"


class SqlBackend:
    """The store's two tables in SQLite or PostgreSQL (the same SQL; only the parameter
    marker differs). Schema created on start if missing."""

    def __init__(self, connection: Any, marker: str, *, inline: bool) -> None:
        self._db = connection
        self._p = marker
        self.inline = inline
        self._lock = threading.Lock()
        with self._lock:
            for statement in _SCHEMA:
                self._db.execute(statement)

    def load(self, head: str) -> list[Row]:
        with self._lock:
            return [tuple(r) for r in self._db.execute(_WALK.format(p=self._p), (head,))]

    def save(self, rows: Sequence[Row]) -> None:
        now, p = time.time(), self._p
        with self._lock:
            self._db.cursor().executemany(
                f"INSERT INTO transcript_messages VALUES ({p}, {p}, {p}, {p}, {p}) {_UPSERT}",
                [(*row, now) for row in rows],
            )

    def load_single(self, key: str) -> str | None:
        with self._lock:
            found = self._db.execute(
                f"SELECT message FROM single_messages WHERE hash = {self._p}", (key,)
            ).fetchone()
        return None if found is None else str(found[0])

    def save_single(self, key: str, message_json: str) -> None:
        p = self._p
        with self._lock:
            self._db.execute(
                f"INSERT INTO single_messages VALUES ({p}, {p}, {p}) {_UPSERT}",
                (key, message_json, time.time()),
            )

    def prune(self, older_than_seconds: float) -> int:
        cutoff = time.time() - older_than_seconds
        removed = 0
        with self._lock:
            for table in ("transcript_messages", "single_messages"):
                deleted = self._db.execute(
                    f"DELETE FROM {table} WHERE stored_at < {self._p}", (cutoff,)
                )
                removed += int(deleted.rowcount)
        return removed

    def wipe(self) -> None:
        with self._lock:
            self._db.execute("DELETE FROM transcript_messages")
            self._db.execute("DELETE FROM single_messages")


def SqliteBackend(path: Path) -> SqlBackend:
    """A local file in WAL mode: microseconds a write, so it runs on the event loop."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    # a cache of what history already holds: losing the last writes costs a resend
    connection.execute("PRAGMA synchronous=NORMAL")
    return SqlBackend(connection, "?", inline=True)


def PostgresBackend(url: str) -> SqlBackend:
    """A shared server for all workers; calls go to a thread, off the event loop."""
    import psycopg  # imported here: only PostgreSQL deployments need it

    return SqlBackend(psycopg.connect(url, autocommit=True), "%s", inline=False)


class TranscriptStore:
    def __init__(self, backend: TranscriptBackend | None = None, cache_size: int = 512) -> None:
        self.backend = backend
        self._cache: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._singles: OrderedDict[str, Message] = OrderedDict()
        self._cache_size = cache_size

    async def load(self, head: str) -> tuple[Message, ...] | None:
        """The messages whose chain hash is ``head``, or ``None`` if this store lacks them."""
        cached = self._cache.get(head)
        if cached is not None:
            self._cache.move_to_end(head)
            return cached
        if head == EMPTY_HASH:
            return ()
        if self.backend is None:
            return None
        rows = await self._call(self.backend.load, head)
        chain = _complete_chain(rows, head)
        if chain is None:
            return None
        messages = tuple(parse_message(json.loads(m)) for m in chain)
        self._remember(head, messages)
        return messages

    async def extend(
        self, base: str, prefix: tuple[Message, ...], appended: Sequence[Message]
    ) -> tuple[str, tuple[Message, ...]]:
        """Store ``appended`` after the prefix named ``base``; return the new head."""
        rows: list[Row] = []
        head = base
        for offset, message in enumerate(appended):
            encoded = canonical_json(message)
            parent, head = head, chain_hash(head, encoded)
            rows.append((head, parent, len(prefix) + offset, encoded))
        messages = prefix + tuple(appended)
        if rows and self.backend is not None:
            await self._call(self.backend.save, rows)
        self._remember(head, messages)
        return head, messages

    async def put_message(self, message: Message) -> str:
        """Keep one message by its content hash (a tool result, before the workflow has
        placed it in the chain)."""
        encoded = canonical_json(message)
        key = content_hash(message)
        self._singles[key] = message
        while len(self._singles) > self._cache_size * 8:
            self._singles.popitem(last=False)
        if self.backend is not None:
            await self._call(self.backend.save_single, key, encoded)
        return key

    async def load_message(self, key: str) -> Message | None:
        found = self._singles.get(key)
        if found is not None or self.backend is None:
            return found
        encoded = await self._call(self.backend.load_single, key)
        return None if encoded is None else parse_message(json.loads(encoded))

    async def put_setup(self, digest: str, setup_json: str) -> None:
        """Keep a session's model setup where every worker sharing the store finds it,
        so a worker that just started need not ask the workflow for it again."""
        if self.backend is not None:
            await self._call(self.backend.save_single, f"setup:{digest}", setup_json)

    async def load_setup(self, digest: str) -> str | None:
        if self.backend is None:
            return None
        found: str | None = await self._call(self.backend.load_single, f"setup:{digest}")
        return found

    async def _call(self, operation: Callable[..., T], *args: Any) -> T:
        assert self.backend is not None
        if self.backend.inline:
            return operation(*args)
        return await asyncio.to_thread(operation, *args)

    def forget(self) -> None:
        """Drop the in-process cache (the backend keeps its rows)."""
        self._cache.clear()
        self._singles.clear()

    def _remember(self, head: str, messages: tuple[Message, ...]) -> None:
        self._cache[head] = messages
        self._cache.move_to_end(head)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)


def default_store_url(data_dir: Path) -> str:
    """The embedded default: a SQLite file in the data folder."""
    return f"sqlite:///{data_dir / 'transcripts.sqlite'}"


def open_transcript_store(url: str) -> TranscriptStore:
    if url == "memory:":
        return TranscriptStore()
    if url.startswith("sqlite:///"):
        return TranscriptStore(SqliteBackend(Path(url.removeprefix("sqlite:///"))))
    if url.startswith(("postgresql://", "postgres://")):
        return TranscriptStore(PostgresBackend(url))
    raise ValueError(
        f"unknown transcript store {url!r}: use sqlite:///path, postgresql://... or memory:"
    )
