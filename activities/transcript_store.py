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
import contextvars
import functools
import hashlib
import json
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import structlog

from durable_agent._payloads.encryption import CodecKeys
from durable_agent._wire.messages import Message, parse_message
from durable_agent._wire.transcript import ROOTS, canonical_json, chain_hash, json_digest

log = structlog.get_logger("durable_agent.transcripts")
T = TypeVar("T")
Row = tuple[str, str, int, str]
"""(hash, parent hash, position, canonical message JSON)"""


class TranscriptBackend(Protocol):
    async def load(self, head: str) -> list[Row]: ...
    async def save(self, rows: Sequence[Row]) -> None: ...
    async def load_single(self, key: str) -> str | None: ...
    async def save_single(self, key: str, message_json: str) -> None: ...
    async def prune(self, older_than_seconds: float) -> int: ...
    async def wipe(self) -> None: ...


def _complete_chain(rows: list[Row], head: str) -> list[str] | None:
    """The messages of ``head``'s prefix, or ``None`` if any ancestor is missing."""
    if not rows:
        return [] if head in ROOTS else None
    ordered = sorted(rows, key=lambda r: r[2])
    if ordered[0][1] not in ROOTS or ordered[-1][0] != head or ordered[-1][2] != len(rows) - 1:
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
_TABLES = ("transcript_messages", "single_messages")
_UPSERT = "ON CONFLICT (hash) DO UPDATE SET stored_at = excluded.stored_at"


class _Statements:
    """The store's SQL, the same for SQLite and PostgreSQL but for the parameter marker."""

    def __init__(self, p: str) -> None:
        self.walk = f"""
WITH RECURSIVE chain(hash, parent, position, message) AS (
    SELECT hash, parent, position, message FROM transcript_messages WHERE hash = {p}
    UNION ALL
    SELECT t.hash, t.parent, t.position, t.message
    FROM transcript_messages t JOIN chain c ON t.hash = c.parent
)
SELECT hash, parent, position, message FROM chain
"""
        self.save = f"INSERT INTO transcript_messages VALUES ({p}, {p}, {p}, {p}, {p}) {_UPSERT}"
        self.load_single = f"SELECT message FROM single_messages WHERE hash = {p}"
        self.save_single = f"INSERT INTO single_messages VALUES ({p}, {p}, {p}) {_UPSERT}"
        self.prune = {t: f"DELETE FROM {t} WHERE stored_at < {p}" for t in _TABLES}
        self.wipe = [f"DELETE FROM {t}" for t in _TABLES]


class SqliteBackend:
    """A local file in WAL mode: microseconds a write, so it runs on the event loop."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # a cache of what history already holds: losing the last writes costs a resend
        self._db.execute("PRAGMA synchronous=NORMAL")
        for statement in _SCHEMA:
            self._db.execute(statement)
        self._sql = _Statements("?")

    async def load(self, head: str) -> list[Row]:
        return [tuple(r) for r in self._db.execute(self._sql.walk, (head,))]

    async def save(self, rows: Sequence[Row]) -> None:
        now = time.time()
        self._db.executemany(self._sql.save, [(*row, now) for row in rows])

    async def load_single(self, key: str) -> str | None:
        found = self._db.execute(self._sql.load_single, (key,)).fetchone()
        return None if found is None else str(found[0])

    async def save_single(self, key: str, message_json: str) -> None:
        self._db.execute(self._sql.save_single, (key, message_json, time.time()))

    async def prune(self, older_than_seconds: float) -> int:
        cutoff = time.time() - older_than_seconds
        return sum(self._db.execute(q, (cutoff,)).rowcount for q in self._sql.prune.values())

    async def wipe(self) -> None:
        for statement in self._sql.wipe:
            self._db.execute(statement)


class PostgresBackend:
    """A shared server for all workers, through a pool of connections that are checked
    before use and re-opened when the server went away. While it is away, calls are
    retried with backoff for up to ``retry_seconds``; past that the activity fails and
    Temporal retries it (a store outage is infrastructure, like a lost worker)."""

    def __init__(self, url: str, *, retry_seconds: float = 30.0, max_connections: int = 10) -> None:
        from psycopg_pool import AsyncConnectionPool  # only PostgreSQL deployments need it

        self._pool = AsyncConnectionPool(
            url,
            open=False,
            min_size=1,
            max_size=max_connections,
            kwargs={"autocommit": True},
            check=AsyncConnectionPool.check_connection,
            timeout=5.0,
            reconnect_timeout=0,  # keep trying for as long as the store is away
        )
        self._opened = False
        self._retry_seconds = retry_seconds
        self._sql = _Statements("%s")

    async def _run(self, work: Callable[[Any], Awaitable[T]]) -> T:
        import psycopg
        from psycopg_pool import PoolTimeout

        deadline = time.monotonic() + self._retry_seconds
        delay = 0.1
        while True:
            try:
                if not self._opened:
                    await self._pool.open()
                    self._opened = True
                    async with self._pool.connection() as connection:
                        for statement in _SCHEMA:
                            await connection.execute(statement)
                async with self._pool.connection() as connection:
                    return await work(connection)
            except (psycopg.OperationalError, PoolTimeout) as error:
                if time.monotonic() + delay > deadline:
                    raise
                log.warning("transcript store unreachable; retrying", error=str(error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def load(self, head: str) -> list[Row]:
        async def walk(db: Any) -> list[Row]:
            cursor = await db.execute(self._sql.walk, (head,))
            return [tuple(r) for r in await cursor.fetchall()]

        return await self._run(walk)

    async def save(self, rows: Sequence[Row]) -> None:
        now = time.time()

        async def insert(db: Any) -> None:
            async with db.cursor() as cursor:
                await cursor.executemany(self._sql.save, [(*row, now) for row in rows])

        await self._run(insert)

    async def load_single(self, key: str) -> str | None:
        async def read(db: Any) -> str | None:
            found = await (await db.execute(self._sql.load_single, (key,))).fetchone()
            return None if found is None else str(found[0])

        return await self._run(read)

    async def save_single(self, key: str, message_json: str) -> None:
        async def write(db: Any) -> None:
            await db.execute(self._sql.save_single, (key, message_json, time.time()))

        await self._run(write)

    async def prune(self, older_than_seconds: float) -> int:
        cutoff = time.time() - older_than_seconds

        async def delete(db: Any) -> int:
            removed = 0
            for statement in self._sql.prune.values():
                removed += (await db.execute(statement, (cutoff,))).rowcount
            return removed

        return await self._run(delete)

    async def wipe(self) -> None:
        async def delete(db: Any) -> None:
            for statement in self._sql.wipe:
                await db.execute(statement)

        await self._run(delete)

    async def close(self) -> None:
        await self._pool.close()


#: Whose transcripts the current activity may read and write: ``<namespace>/<session>``
#: (the activity interceptor sets it). Every key the store uses is scoped by it, so a
#: reference to another session's messages finds nothing, in the cache or the backend.
transcript_scope: contextvars.ContextVar[str] = contextvars.ContextVar(
    "transcript_scope", default=""
)


def _scoped(key: str) -> str:
    scope = transcript_scope.get()
    if not scope or key in ROOTS:
        return key
    return f"{_scope_prefix(scope)}:{key}"


@functools.lru_cache(maxsize=4096)
def _scope_prefix(scope: str) -> str:
    """A session's key prefix (asked for every key an activity touches: kept)."""
    return hashlib.sha256(scope.encode()).hexdigest()[:16]


def _unscoped(key: str) -> str:
    return key.split(":", 1)[1] if transcript_scope.get() and ":" in key else key


class TranscriptStore:
    def __init__(self, backend: TranscriptBackend | None = None, cache_size: int = 512) -> None:
        self.backend = backend
        self._cache: OrderedDict[str, tuple[Message, ...]] = OrderedDict()
        self._singles: OrderedDict[str, Message] = OrderedDict()
        # the stored JSON of the singles kept, by the message object: a tool result is
        # encoded once, when kept, not again when the model call chains it
        self._single_json: dict[int, tuple[Message, str]] = {}
        self._cache_size = cache_size

    async def load(self, head: str) -> tuple[Message, ...] | None:
        """The messages whose chain hash is ``head``, or ``None`` if this store lacks them
        (in the current session's scope)."""
        cached = self._cache.get(_scoped(head))
        if cached is not None:
            self._cache.move_to_end(_scoped(head))
            return cached
        if head in ROOTS:
            return ()
        if self.backend is None:
            return None
        rows = [
            (_unscoped(h), _unscoped(p), n, m)
            for h, p, n, m in await self.backend.load(_scoped(head))
        ]
        chain = _complete_chain(rows, head)
        if chain is None:
            return None
        messages = tuple(parse_message(json.loads(m)) for m in chain)
        self._remember(head, messages)
        return messages

    async def extend(
        self,
        base: str,
        prefix: tuple[Message, ...],
        appended: Sequence[Message],
        encodings: Sequence[str] | None = None,
    ) -> tuple[str, tuple[Message, ...]]:
        """Store ``appended`` after the prefix named ``base``; return the new head.
        ``encodings``: their canonical JSON, when the caller has it already."""
        rows: list[Row] = []
        head = base
        for offset, message in enumerate(appended):
            encoded = encodings[offset] if encodings is not None else self._json_of(message)
            parent, head = head, chain_hash(head, encoded)
            rows.append((head, parent, len(prefix) + offset, encoded))
        messages = prefix + tuple(appended)
        if rows and self.backend is not None:
            await self.backend.save([(_scoped(h), _scoped(p), n, m) for h, p, n, m in rows])
        self._remember(head, messages)
        return head, messages

    async def put_message(self, message: Message, encoded: str | None = None) -> str:
        """Keep one message by its content hash (a tool result, before the workflow has
        placed it in the chain; a reply the workflow reads in pages). ``encoded``: its
        canonical JSON, when the caller has it."""
        encoded = canonical_json(message) if encoded is None else encoded
        key = json_digest(encoded)
        replaced = self._singles.get(_scoped(key))
        if replaced is not None:
            self._single_json.pop(id(replaced), None)
        self._singles[_scoped(key)] = message
        self._single_json[id(message)] = (message, encoded)
        while len(self._singles) > self._cache_size * 8:
            _, dropped = self._singles.popitem(last=False)
            self._single_json.pop(id(dropped), None)
        if self.backend is not None:
            await self.backend.save_single(_scoped(key), encoded)
        return key

    def kept_json(self, message: Message) -> str | None:
        """The canonical JSON ``message`` was kept as by ``put_message`` (still cached)."""
        known = self._single_json.get(id(message))
        return known[1] if known and known[0] is message else None

    def _json_of(self, message: Message) -> str:
        """``message``'s canonical JSON: as kept by ``put_message``, else encoded now."""
        kept = self.kept_json(message)
        return kept if kept is not None else canonical_json(message)

    async def load_message(self, key: str) -> Message | None:
        found = self._singles.get(_scoped(key))
        if found is not None or self.backend is None:
            return found
        encoded = await self.backend.load_single(_scoped(key))
        return None if encoded is None else parse_message(json.loads(encoded))

    async def put_setup(self, digest: str, setup_json: str) -> None:
        """Keep a session's model setup where every worker sharing the store finds it,
        so a worker that just started need not ask the workflow for it again."""
        await self._put_single(f"setup:{digest}", setup_json)

    async def load_setup(self, digest: str) -> str | None:
        return await self._load_single(f"setup:{digest}")

    async def put_note(self, key: str, text: str) -> None:
        """Keep a small note for the session's later activity attempts (what an attempt
        was billed for), where a worker sharing the store finds it."""
        await self._put_single(f"note:{key}", text)

    async def load_note(self, key: str) -> str | None:
        return await self._load_single(f"note:{key}")

    async def _put_single(self, key: str, text: str) -> None:
        if self.backend is not None:
            await self.backend.save_single(_scoped(key), text)

    async def _load_single(self, key: str) -> str | None:
        if self.backend is None:
            return None
        found: str | None = await self.backend.load_single(_scoped(key))
        return found

    def forget(self) -> None:
        """Drop the in-process cache (the backend keeps its rows)."""
        self._cache.clear()
        self._singles.clear()
        self._single_json.clear()

    def _remember(self, head: str, messages: tuple[Message, ...]) -> None:
        key = _scoped(head)
        self._cache[key] = messages
        self._cache.move_to_end(key)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)


class EncryptedBackend:
    """A backend whose stored texts are encrypted (AES-GCM, bound to their key or hash,
    so a row cannot be moved under another); hashes, positions and times stay clear,
    as the store walks and prunes by them."""

    def __init__(self, backend: TranscriptBackend, keys: CodecKeys) -> None:
        self.backend = backend
        self.keys = keys

    async def load(self, head: str) -> list[Row]:
        rows = await self.backend.load(head)
        return [(h, p, n, self.keys.open_text(text, h)) for h, p, n, text in rows]

    async def save(self, rows: Sequence[Row]) -> None:
        await self.backend.save([(h, p, n, self.keys.seal_text(text, h)) for h, p, n, text in rows])

    async def load_single(self, key: str) -> str | None:
        found = await self.backend.load_single(key)
        return None if found is None else self.keys.open_text(found, key)

    async def save_single(self, key: str, message_json: str) -> None:
        await self.backend.save_single(key, self.keys.seal_text(message_json, key))

    async def prune(self, older_than_seconds: float) -> int:
        return await self.backend.prune(older_than_seconds)

    async def wipe(self) -> None:
        await self.backend.wipe()


def default_store_url(data_dir: Path) -> str:
    """The embedded default: a SQLite file in the data folder."""
    return f"sqlite:///{data_dir / 'transcripts.sqlite'}"


def open_transcript_store(url: str, keys: CodecKeys | None = None) -> TranscriptStore:
    """The store at ``url``; with ``keys``, every message it writes is encrypted."""
    backend: TranscriptBackend
    if url == "memory:":
        return TranscriptStore()
    if url.startswith("sqlite:///"):
        backend = SqliteBackend(Path(url.removeprefix("sqlite:///")))
    elif url.startswith(("postgresql://", "postgres://")):
        backend = PostgresBackend(url)
    else:
        raise ValueError(
            f"unknown transcript store {url!r}: use sqlite:///path, postgresql://... or memory:"
        )
    return TranscriptStore(backend if keys is None else EncryptedBackend(backend, keys))
