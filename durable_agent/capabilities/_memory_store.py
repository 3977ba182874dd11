"""Where memories and workspace files live: a database outside the session's history.

Memories are keyed by (namespace, key) and carry text, metadata, their times and an
optional expiry; workspace files are keyed by (namespace, normalised path). SQLite is
the embedded default (a file in the worker's data folder, keyword search from its FTS5
index); PostgreSQL (the ``postgres`` extra, as for transcripts) serves many workers,
keyword search from its own full-text index.

A write that carries a write key (a tool call's idempotency key) happens once: the key
is recorded in the write's own transaction with what the write answered, and the same
key again answers that, so a retried or redelivered call never writes twice.

With the codec keys, nothing a person or a model wrote is readable in the database:
texts, metadata, keys, paths and vectors are sealed (AES-GCM, bound to their row), and
the search index holds keyed hashes of words, never the words. Keyword search then
matches whole words only. Namespaces, owners and times stay clear: the store finds and
expires rows by them, and they come from the owner's template, not from the model.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import sqlite3
import time
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from durable_agent._errors import DurableAgentError, NotAllowed
from durable_agent._payloads.encryption import CodecKeys

T = TypeVar("T")
WORDS = re.compile(r"\w+")
#: Words of one text the index keeps (a memory is a note, not a book).
MAX_TERMS = 4000


@dataclass(frozen=True)
class MemoryRecord:
    """One memory as the store holds it (``score``: how well it matched a search)."""

    namespace: str
    key: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    expires_at: float | None = None
    score: float | None = None

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"namespace": self.namespace, "key": self.key, "text": self.text}
        found |= {"metadata": self.metadata, "created_at": self.created_at}
        found |= {"updated_at": self.updated_at, "expires_at": self.expires_at}
        return found if self.score is None else {**found, "score": round(self.score, 4)}


@dataclass(frozen=True)
class FileRecord:
    """One workspace file: its path, content and size in bytes."""

    namespace: str
    path: str
    content: str
    size: int
    updated_at: float


class Transaction(Protocol):
    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]: ...
    async def do(self, sql: str, params: Sequence[Any] = ()) -> int: ...


_TABLES = (
    "CREATE TABLE IF NOT EXISTS memories (id {serial}, namespace TEXT NOT NULL, "
    "key_id TEXT NOT NULL, key_text TEXT NOT NULL, tenant TEXT NOT NULL, text TEXT NOT NULL, "
    "metadata TEXT NOT NULL, embedding TEXT, created_at DOUBLE PRECISION NOT NULL, "
    "updated_at DOUBLE PRECISION NOT NULL, expires_at DOUBLE PRECISION{terms}, "
    "UNIQUE (namespace, key_id))",
    "CREATE INDEX IF NOT EXISTS memories_tenant ON memories (tenant, namespace)",
    "CREATE TABLE IF NOT EXISTS memory_writes (write_key TEXT PRIMARY KEY, "
    "answer TEXT NOT NULL, written_at DOUBLE PRECISION NOT NULL)",
    "CREATE TABLE IF NOT EXISTS workspace_files (namespace TEXT NOT NULL, "
    "path_id TEXT NOT NULL, path_text TEXT NOT NULL, tenant TEXT NOT NULL, "
    "content TEXT NOT NULL, size INTEGER NOT NULL, updated_at DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (namespace, path_id))",
)
SQLITE_SCHEMA = (
    *(t.format(serial="INTEGER PRIMARY KEY", terms="") for t in _TABLES),
    # the index's rows share their memory's id: one delete and one insert keep it current
    "CREATE VIRTUAL TABLE IF NOT EXISTS memory_index USING fts5(terms)",
)
POSTGRES_SCHEMA = (
    *(t.format(serial="BIGSERIAL PRIMARY KEY", terms=", terms TSVECTOR") for t in _TABLES),
    "CREATE INDEX IF NOT EXISTS memories_terms ON memories USING GIN (terms)",
)


class _SqliteTransaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._db.execute(sql, params)]

    async def do(self, sql: str, params: Sequence[Any] = ()) -> int:
        return self._db.execute(sql, params).rowcount


class SqliteDatabase:
    """A local file in WAL mode; one transaction at a time (a write takes microseconds,
    a search a few milliseconds, so they run on the event loop)."""

    dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA busy_timeout=5000")  # another process may write: wait
        for statement in SQLITE_SCHEMA:
            self._db.execute(statement)
        self._lock = asyncio.Lock()

    async def run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        async with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                done = await work(_SqliteTransaction(self._db))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return done

    async def close(self) -> None:
        self._db.close()


class _PostgresTransaction:
    def __init__(self, connection: Any) -> None:
        self._connection = connection

    async def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor = await self._connection.execute(sql.replace("?", "%s"), params)
        return [tuple(r) for r in await cursor.fetchall()] if cursor.description else []

    async def do(self, sql: str, params: Sequence[Any] = ()) -> int:
        cursor = await self._connection.execute(sql.replace("?", "%s"), params)
        return int(cursor.rowcount)


class PostgresDatabase:
    """A server all workers share, through a pool of connections checked before use,
    as the transcript store opens it; each unit of work is one transaction."""

    dialect = "postgres"

    def __init__(self, url: str, *, max_connections: int = 10) -> None:
        from psycopg_pool import AsyncConnectionPool  # only PostgreSQL deployments need it

        self._pool = AsyncConnectionPool(
            url,
            open=False,
            min_size=1,
            max_size=max_connections,
            kwargs={"autocommit": True},
            check=AsyncConnectionPool.check_connection,
            timeout=5.0,
        )
        self._opened: asyncio.Lock | None = None
        self._ready = False

    async def run(self, work: Callable[[Transaction], Awaitable[T]]) -> T:
        if not self._ready:
            self._opened = self._opened or asyncio.Lock()
            async with self._opened:
                if not self._ready:
                    await self._pool.open()
                    async with self._pool.connection() as connection:
                        # two workers creating the tables at once: one waits for the other
                        await connection.execute("SELECT pg_advisory_lock(7207)")
                        for statement in POSTGRES_SCHEMA:
                            await connection.execute(statement)
                        await connection.execute("SELECT pg_advisory_unlock(7207)")
                    self._ready = True
        async with self._pool.connection() as connection, connection.transaction():
            return await work(_PostgresTransaction(connection))

    async def close(self) -> None:
        await self._pool.close()


Database = SqliteDatabase | PostgresDatabase


def open_database(url: str) -> Database:
    """``sqlite:///path`` or ``postgresql://...``."""
    if url.startswith("sqlite:///"):
        return SqliteDatabase(Path(url.removeprefix("sqlite:///")))
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresDatabase(url)
    raise ValueError(f"unknown memory store {url!r}: use sqlite:///path or postgresql://...")


def default_memory_url(data_dir: Path) -> str:
    """The embedded default: a SQLite file in the worker's data folder, beside its
    transcripts."""
    return f"sqlite:///{data_dir / 'memory.sqlite'}"


class _Sealer:
    """How texts are kept: as they are, or sealed with the codec keys, and how words
    and identifiers become the index's terms (keyed hashes when sealed)."""

    def __init__(self, keys: CodecKeys | None) -> None:
        self.keys = keys
        first = keys.keys[0][1] if keys is not None else b""
        self._index_key = hmac.new(first, b"durable-agent memory index", "sha256").digest()

    def seal(self, text: str, bound: str) -> str:
        return text if self.keys is None else self.keys.seal_text(text, bound)

    def open(self, stored: str, bound: str) -> str:
        return stored if self.keys is None else self.keys.open_text(stored, bound)

    def ident(self, text: str) -> str:
        """A key's or path's identity in its row: itself, or its keyed hash."""
        if self.keys is None:
            return text
        return hmac.new(self._index_key, text.encode(), "sha256").hexdigest()

    def term(self, word: str) -> str:
        if self.keys is None:
            return word
        return "h" + hmac.new(self._index_key, word.encode(), "sha256").hexdigest()[:24]

    def terms(self, text: str) -> list[str]:
        return [self.term(w) for w in WORDS.findall(text.lower())[:MAX_TERMS]]


def _json_or_empty(text: str) -> dict[str, Any]:
    found = json.loads(text) if text else {}
    return found if isinstance(found, dict) else {}


class MemoryStore:
    """Memories and workspace files in one database (``open_memory_store``)."""

    def __init__(self, database: Database, keys: CodecKeys | None = None) -> None:
        self.database = database
        self._sealer = _Sealer(keys)

    # --- writes -----------------------------------------------------------------------

    async def once(
        self, write_key: str | None, write: Callable[[Transaction], Awaitable[str]]
    ) -> str:
        """Run ``write`` in one transaction and answer what it answers; with a
        ``write_key`` seen before, answer what that write answered without writing."""
        sealer = self._sealer

        async def work(tx: Transaction) -> str:
            if write_key is None:
                return await write(tx)
            key = sealer.ident(write_key)
            await self._lock(tx, key)
            found = await tx.rows("SELECT answer FROM memory_writes WHERE write_key = ?", (key,))
            if found:
                return sealer.open(str(found[0][0]), key)
            answer = await write(tx)
            await tx.do(
                "INSERT INTO memory_writes VALUES (?, ?, ?)",
                (key, sealer.seal(answer, key), time.time()),
            )
            return answer

        return await self.database.run(work)

    async def answered(self, write_key: str) -> str | None:
        """What the write of ``write_key`` answered, if it happened."""
        key = self._sealer.ident(write_key)

        async def work(tx: Transaction) -> list[tuple[Any, ...]]:
            return await tx.rows("SELECT answer FROM memory_writes WHERE write_key = ?", (key,))

        found = await self.database.run(work)
        return self._sealer.open(str(found[0][0]), key) if found else None

    async def put(
        self,
        tx: Transaction,
        namespace: str,
        key: str,
        text: str,
        *,
        tenant: str,
        metadata: dict[str, Any] | None = None,
        ttl_seconds: float | None = None,
        embedding: list[float] | None = None,
    ) -> bool:
        """Write a memory (within ``once``); whether it was new."""
        now = time.time()
        expires = None if ttl_seconds is None else now + ttl_seconds
        key_id = self._sealer.ident(key)
        bound = f"{namespace}\0{key_id}"
        await self._lock(tx, f"{namespace}/{key_id}")
        sealed = (
            self._sealer.seal(key, bound),
            self._sealer.seal(text, bound),
            self._sealer.seal(json.dumps(metadata or {}, ensure_ascii=False), bound),
            None if embedding is None else self._sealer.seal(json.dumps(embedding), bound),
        )
        terms = " ".join([self._namespace_term(namespace), *self._sealer.terms(f"{key} {text}")])
        postgres = self.database.dialect == "postgres"
        # PostgreSQL keeps the index in the row: written with it, not updated after
        indexed, terms_value = (
            (", terms = to_tsvector('simple', ?)", (terms,)) if postgres else ("", ())
        )
        found = await tx.rows(
            "SELECT id FROM memories WHERE namespace = ? AND key_id = ?", (namespace, key_id)
        )
        if found:
            row_id = found[0][0]
            await tx.do(
                "UPDATE memories SET key_text = ?, text = ?, metadata = ?, embedding = ?, "
                f"updated_at = ?, expires_at = ?{indexed} WHERE id = ?",
                (*sealed, now, expires, *terms_value, row_id),
            )
        else:
            columns = ", terms" if postgres else ""
            marker = ", to_tsvector('simple', ?)" if postgres else ""
            await tx.do(
                "INSERT INTO memories (namespace, key_id, key_text, tenant, text, metadata, "
                f"embedding, created_at, updated_at, expires_at{columns}) "
                f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?{marker})",
                (
                    namespace,
                    key_id,
                    sealed[0],
                    tenant,
                    *sealed[1:],
                    now,
                    now,
                    expires,
                    *terms_value,
                ),
            )
            row_id = (
                await tx.rows(
                    "SELECT id FROM memories WHERE namespace = ? AND key_id = ?",
                    (namespace, key_id),
                )
            )[0][0]
        if not postgres:
            await tx.do("DELETE FROM memory_index WHERE rowid = ?", (row_id,))
            await tx.do("INSERT INTO memory_index (rowid, terms) VALUES (?, ?)", (row_id, terms))
        return not found

    async def _lock(self, tx: Transaction, name: str) -> None:
        """Hold ``name`` until the transaction ends: two workers writing the same key at
        once take turns (SQLite's transactions take turns already)."""
        if self.database.dialect == "postgres":
            await tx.rows("SELECT pg_advisory_xact_lock(hashtext(?))", (name,))

    async def read_in(self, tx: Transaction, namespace: str, key: str) -> str | None:
        """A memory's text, within a transaction (``None``: none, or expired)."""
        key_id = self._sealer.ident(key)
        rows = await tx.rows(
            "SELECT text FROM memories WHERE namespace = ? AND key_id = ? "
            "AND (expires_at IS NULL OR expires_at > ?)",
            (namespace, key_id, time.time()),
        )
        return self._sealer.open(str(rows[0][0]), f"{namespace}\0{key_id}") if rows else None

    async def exists(self, tx: Transaction, namespace: str, key: str) -> bool:
        rows = await tx.rows(
            "SELECT 1 FROM memories WHERE namespace = ? AND key_id = ?",
            (namespace, self._sealer.ident(key)),
        )
        return bool(rows)

    async def remove(self, tx: Transaction, namespace: str, key: str) -> bool:
        """Delete a memory (within ``once``); whether there was one."""
        key_id = self._sealer.ident(key)
        found = await tx.rows(
            "SELECT id FROM memories WHERE namespace = ? AND key_id = ?", (namespace, key_id)
        )
        if not found:
            return False
        if self.database.dialect == "sqlite":
            await tx.do("DELETE FROM memory_index WHERE rowid = ?", (found[0][0],))
        await tx.do("DELETE FROM memories WHERE id = ?", (found[0][0],))
        return True

    async def expire(self) -> int:
        """Delete the memories whose time to live has passed; how many."""
        now = time.time()

        async def work(tx: Transaction) -> int:
            gone = await tx.rows(
                "SELECT id FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)
            )
            for (row_id,) in gone:
                if self.database.dialect == "sqlite":
                    await tx.do("DELETE FROM memory_index WHERE rowid = ?", (row_id,))
                await tx.do("DELETE FROM memories WHERE id = ?", (row_id,))
            return len(gone)

        return await self.database.run(work)

    # --- reads ------------------------------------------------------------------------

    _COLUMNS = "namespace, key_id, key_text, text, metadata, created_at, updated_at, expires_at"

    def _record(self, row: Sequence[Any], score: float | None = None) -> MemoryRecord:
        namespace, key_id, key_text, text, metadata, created, updated, expires = row[:8]
        bound = f"{namespace}\0{key_id}"
        return MemoryRecord(
            namespace=namespace,
            key=self._sealer.open(key_text, bound),
            text=self._sealer.open(text, bound),
            metadata=_json_or_empty(self._sealer.open(metadata, bound)),
            created_at=created,
            updated_at=updated,
            expires_at=expires,
            score=score,
        )

    async def get(self, namespace: str, key: str) -> MemoryRecord | None:
        async def work(tx: Transaction) -> list[tuple[Any, ...]]:
            return await tx.rows(
                f"SELECT {self._COLUMNS} FROM memories WHERE namespace = ? AND key_id = ? "
                "AND (expires_at IS NULL OR expires_at > ?)",
                (namespace, self._sealer.ident(key), time.time()),
            )

        found = await self.database.run(work)
        return self._record(found[0]) if found else None

    async def search(
        self, namespace: str, query: str, limit: int = 5, *, tenant: str | None = None
    ) -> list[MemoryRecord]:
        """The memories of ``namespace`` with the most words of ``query``, best first,
        from the database's full-text index; with ``tenant``, ``NotAllowed`` when the
        namespace holds another tenant's rows (checked in the same transaction)."""
        words = sorted(set(self._sealer.terms(query)))
        if not words:
            return []
        now = time.time()
        if self.database.dialect == "sqlite":
            anyword = " OR ".join(f'"{w}"' for w in words)
            match = f'"{self._namespace_term(namespace)}" AND ({anyword})'
            sql = (
                f"SELECT {', '.join('m.' + c for c in self._COLUMNS.split(', '))}, "
                "bm25(memory_index) AS rank FROM memory_index JOIN memories m "
                "ON m.id = memory_index.rowid WHERE memory_index MATCH ? AND m.namespace = ? "
                "AND (m.expires_at IS NULL OR m.expires_at > ?) ORDER BY rank LIMIT ?"
            )
            params: tuple[Any, ...] = (match, namespace, now, limit)
        else:
            sql = (
                f"SELECT {self._COLUMNS}, -ts_rank(terms, q) AS rank FROM memories, "
                "to_tsquery('simple', ?) q WHERE namespace = ? AND terms @@ q "
                "AND (expires_at IS NULL OR expires_at > ?) ORDER BY rank LIMIT ?"
            )
            params = (" | ".join(words), namespace, now, limit)

        async def work(tx: Transaction) -> list[tuple[Any, ...]]:
            if tenant is not None:
                holder = await tx.rows(
                    "SELECT tenant FROM memories WHERE namespace = ? LIMIT 1", (namespace,)
                )
                if holder and holder[0][0] != tenant:
                    raise NotAllowed("this namespace belongs to another tenant")
            return await tx.rows(sql, params)

        return [self._record(row, -float(row[8])) for row in await self.database.run(work)]

    async def nearest(
        self, namespace: str, vector: Sequence[float], limit: int = 5
    ) -> list[MemoryRecord]:
        """The memories of ``namespace`` whose vectors are nearest ``vector`` (cosine)."""

        async def work(tx: Transaction) -> list[tuple[Any, ...]]:
            return await tx.rows(
                f"SELECT {self._COLUMNS}, embedding FROM memories WHERE namespace = ? "
                "AND embedding IS NOT NULL AND (expires_at IS NULL OR expires_at > ?)",
                (namespace, time.time()),
            )

        scored = []
        for row in await self.database.run(work):
            bound = f"{row[0]}\0{row[1]}"
            other = json.loads(self._sealer.open(row[8], bound))
            scored.append((_cosine(vector, other), row))
        scored.sort(key=lambda pair: -pair[0])
        return [self._record(row, score) for score, row in scored[:limit]]

    async def listed(
        self, namespace: str | None = None, tenant: str | None = None, limit: int = 100
    ) -> list[MemoryRecord]:
        """Memories by namespace and owner (each when given), newest first."""
        where, params = ["(expires_at IS NULL OR expires_at > ?)"], [time.time()]
        for column, value in (("namespace", namespace), ("tenant", tenant)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)  # type: ignore[arg-type]

        async def work(tx: Transaction) -> list[tuple[Any, ...]]:
            return await tx.rows(
                f"SELECT {self._COLUMNS} FROM memories WHERE {' AND '.join(where)} "
                "ORDER BY updated_at DESC LIMIT ?",
                (*params, limit),
            )

        return [self._record(row) for row in await self.database.run(work)]

    async def tenant_of(self, namespace: str) -> str | None:
        """The owner of a namespace's rows (``None``: it has none)."""

        async def work(tx: Transaction) -> list[tuple[Any, ...]]:
            query = "SELECT tenant FROM {} WHERE namespace = ? LIMIT 1"
            return [
                *await tx.rows(query.format("memories"), (namespace,)),
                *await tx.rows(query.format("workspace_files"), (namespace,)),
            ]

        found = await self.database.run(work)
        return str(found[0][0]) if found else None

    def _namespace_term(self, namespace: str) -> str:
        return "n" + hashlib.sha256(self._sealer.term(namespace).encode()).hexdigest()[:24]

    # --- workspace files --------------------------------------------------------------

    async def files(self, namespace: str) -> list[FileRecord]:
        async def work(tx: Transaction) -> list[tuple[Any, ...]]:
            return await tx.rows(
                "SELECT path_id, path_text, content, size, updated_at FROM workspace_files "
                "WHERE namespace = ?",
                (namespace,),
            )

        found = []
        for path_id, path_text, content, size, updated in await self.database.run(work):
            bound = f"{namespace}\0{path_id}"
            path = self._sealer.open(path_text, bound)
            found.append(
                FileRecord(namespace, path, self._sealer.open(content, bound), size, updated)
            )
        return sorted(found, key=lambda f: f.path)

    async def write_file(
        self, tx: Transaction, namespace: str, path: str, content: str, *, tenant: str
    ) -> None:
        path_id = self._sealer.ident(path)
        bound = f"{namespace}\0{path_id}"
        size = len(content.encode())
        row = (self._sealer.seal(path, bound), self._sealer.seal(content, bound), size)
        await tx.do(
            "DELETE FROM workspace_files WHERE namespace = ? AND path_id = ?", (namespace, path_id)
        )
        await tx.do(
            "INSERT INTO workspace_files VALUES (?, ?, ?, ?, ?, ?, ?)",
            (namespace, path_id, row[0], tenant, row[1], size, time.time()),
        )

    async def read_file(self, namespace: str, path: str) -> FileRecord | None:
        path_id = self._sealer.ident(path)

        async def work(tx: Transaction) -> list[tuple[Any, ...]]:
            return await tx.rows(
                "SELECT content, size, updated_at FROM workspace_files "
                "WHERE namespace = ? AND path_id = ?",
                (namespace, path_id),
            )

        found = await self.database.run(work)
        if not found:
            return None
        content, size, updated = found[0]
        text = self._sealer.open(content, f"{namespace}\0{path_id}")
        return FileRecord(namespace, path, text, size, updated)

    async def usage(self, tx: Transaction, namespace: str, leaving: str) -> tuple[int, int]:
        """The files and bytes of a workspace, less the file at ``leaving``."""
        found = await tx.rows(
            "SELECT count(*), coalesce(sum(size), 0) FROM workspace_files "
            "WHERE namespace = ? AND path_id != ?",
            (namespace, self._sealer.ident(leaving)),
        )
        return int(found[0][0]), int(found[0][1])

    async def delete_file(self, tx: Transaction, namespace: str, path: str) -> bool:
        return (
            await tx.do(
                "DELETE FROM workspace_files WHERE namespace = ? AND path_id = ?",
                (namespace, self._sealer.ident(path)),
            )
            > 0
        )

    async def close(self) -> None:
        await self.database.close()


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = (sum(x * x for x in a) ** 0.5) * (sum(y * y for y in b) ** 0.5)
    return dot / norm if norm else 0.0


def open_memory_store(url: str, keys: CodecKeys | None = None) -> MemoryStore:
    """The store at ``url`` (``sqlite:///path`` or ``postgresql://...``); with ``keys``,
    everything written is sealed."""
    return MemoryStore(open_database(url), keys)


# How the store keys a file's path (the workspace's files, and the memory tool's):
# one spelling for each place, and nothing that climbs out of its namespace.

MAX_PATH = 500


class PathRefused(DurableAgentError, ValueError):
    """A path that is not a path inside the workspace; the message says why."""


def normalised(path: str) -> str:
    """``path`` as the workspace keys it (``/a/b``), or ``PathRefused``."""
    if unicodedata.normalize("NFKC", path) != path:
        raise PathRefused("the path has look-alike characters: write it in plain characters")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") for c in path):
        raise PathRefused("the path has a control or invisible character")
    if "\\" in path:
        raise PathRefused("write paths with '/', not '\\'")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathRefused("'..' is not allowed: paths stay inside the workspace")
    found = "/" + "/".join(parts)
    if len(found) > MAX_PATH:
        raise PathRefused(f"the path is longer than {MAX_PATH} characters")
    return found
