"""The memory store on real SQLite and a real PostgreSQL: keyword recall from each
database's own full-text index, expiry, one row for a write run twice, nothing
readable at rest with the codec keys, search by meaning through an embeddings endpoint
on 127.0.0.1, and the namespace rules (another tenant's namespace, a spec that tries to
choose one, an embeddings endpoint a spec tries to point elsewhere)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError
from structlog.testing import capture_logs

from durable_agent._errors import NotAllowed
from durable_agent._payloads.encryption import CodecKeys
from durable_agent._spec.document import AgentSpec
from durable_agent._spec.tools import ToolContext
from durable_agent.capabilities import Embeddings, Memory, MemorySource
from durable_agent.capabilities._memory import MemoryTool, Scope
from durable_agent.capabilities._memory_store import MemoryStore, open_memory_store
from tests.support.embeddings_server import EmbeddingsServer
from tests.support.postgres_server import running_postgres
from tests.support.recording_server import RecordingServer

ALICE = Scope(user="token:alice", tenant="acme", session="s-1")
BOB = Scope(user="token:bob", tenant="globex", session="s-2")
TEMPLATE = "tenant/{tenant}/user/{user}"


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with running_postgres() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'memory.sqlite'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


def call(slot: int, session: str = "s-1") -> ToolContext:
    return ToolContext(
        session_id=session,
        turn=1,
        slot=slot,
        tool_call_id=f"call_{slot}",
        idempotency_key=f"{session}:1:{slot}",
    )


async def use(
    kind: Memory, tool: str, arguments: dict[str, object], slot: int, scope: Scope = ALICE
) -> tuple[str, bool]:
    return await kind.serve(
        MemoryTool(source="notes", tool=tool), arguments, call(slot, scope.session), scope
    )


async def rows(store: MemoryStore, tenant: str | None = None) -> int:
    return len(await store.listed(tenant=tenant, limit=10_000))


async def test_keyword_recall_update_expiry_and_forget(store_url: str) -> None:
    store = open_memory_store(store_url)
    kind = Memory(store, {"notes": TEMPLATE}, tenants={"token:alice": "acme"})
    await use(kind, "remember", {"key": "plan", "text": "On the Pro plan since March"}, 0)
    await use(kind, "remember", {"key": "pet", "text": "Has a dog called Rex"}, 1)
    await use(
        kind, "remember", {"key": "soon", "text": "A plan that expires", "ttl_seconds": 0.5}, 2
    )
    found = json.loads((await use(kind, "recall", {"query": "which plan?"}, 3))[0])["memories"]
    assert [m["key"] for m in found][:2] in (["plan", "soon"], ["soon", "plan"])
    updated = await use(kind, "update", {"key": "plan", "text": "Moved to the Team plan"}, 4)
    assert updated == ("Updated 'plan'.", False)
    await asyncio.sleep(0.6)
    found = json.loads((await use(kind, "recall", {"query": "plan"}, 5))[0])["memories"]
    assert found == [{"key": "plan", "text": "Moved to the Team plan"}]  # 'soon' expired
    assert await store.expire() == 1
    assert await use(kind, "forget", {"key": "pet"}, 6) == ("Forgot 'pet'.", False)
    assert await use(kind, "forget", {"key": "pet"}, 7) == ("no memory 'pet' to forget", True)
    assert [m.key for m in await store.listed(tenant="acme")] == ["plan"]
    await store.close()


async def test_a_write_run_twice_writes_once(store_url: str) -> None:
    """A retried or redelivered call carries the same idempotency key: the second run
    answers what the first did and writes nothing (run concurrently too)."""
    store = open_memory_store(store_url)
    kind = Memory(store, {"notes": TEMPLATE}, tenants={"token:alice": "acme"})
    before = await rows(store, "acme")
    write = {"key": "twice", "text": "written once"}
    answers = await asyncio.gather(*(use(kind, "remember", write, 40) for _ in range(3)))
    again = await use(kind, "update", {"key": "twice", "text": "changed"}, 40)  # same key
    assert answers == [("Remembered 'twice'.", False)] * 3
    assert again == ("Remembered 'twice'.", False)  # the first write's answer, not run
    assert await rows(store, "acme") == before + 1
    assert (await store.get("tenant/acme/user/token:alice", "twice")).text == "written once"  # type: ignore[union-attr]
    await store.close()


async def test_nothing_readable_at_rest_with_the_codec_keys(tmp_path: Path) -> None:
    keys = CodecKeys.parse(CodecKeys.generate("k1"))
    kind = Memory(f"sqlite:///{tmp_path / 'm.sqlite'}", {"notes": TEMPLATE}, keys=keys)
    text = "Alice's locker combination is vermilion-4471"
    await use(
        kind, "remember", {"key": "locker_code", "text": text, "metadata": {"tag": "zanzibar"}}, 0
    )
    found = await use(kind, "recall", {"query": "locker combination"}, 1)
    await kind.store.close()
    assert "vermilion-4471" in found[0]  # keyword search works on the keyed hashes
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for word in (b"vermilion", b"4471", b"locker", b"combination", b"zanzibar"):
        assert word not in stored
    other = Memory(f"sqlite:///{tmp_path / 'm.sqlite'}", {"notes": TEMPLATE})
    with pytest.raises(ValueError):  # without the keys the rows do not open
        await other.store.listed()


async def test_recall_by_meaning_through_the_owners_embeddings_endpoint(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-embeddings-secret-4f1c"
    monkeypatch.setenv("EMBED_KEY", secret)
    with EmbeddingsServer() as server, capture_logs() as logged:
        embeddings = Embeddings(base_url=f"{server.url}/v1", model="tiny", api_key_env="EMBED_KEY")
        store = open_memory_store(store_url)
        kind = Memory(store, {"notes": "meaning/{user}"}, embeddings=embeddings)
        scope = Scope(user="token:carol", tenant="token:carol", session="s-9")
        await use(kind, "remember", {"key": "pet", "text": "Carol has a puppy"}, 0, scope)
        await use(
            kind, "remember", {"key": "ride", "text": "Carol drives an old automobile"}, 1, scope
        )
        by_words = await use(kind, "recall", {"query": "canine"}, 2, scope)
        by_meaning = await use(kind, "recall", {"query": "canine", "by_meaning": True}, 3, scope)
        await store.close()
    assert json.loads(by_words[0]) == {"memories": []}
    assert json.loads(by_meaning[0])["memories"][0]["key"] == "pet"
    assert {path for path, _, _ in server.requests} == {"/v1/embeddings"}
    assert [body["input"] for _, _, body in server.requests][-1] == ["canine"]
    assert {h["Authorization"] for _, h, _ in server.requests} == {f"Bearer {secret}"}
    assert secret not in repr(logged) and secret not in by_meaning[0]


async def test_another_tenants_namespace_is_refused_and_left_unchanged(tmp_path: Path) -> None:
    """Two templates that can produce the same namespace: the tenant that wrote first
    keeps it; the other reads nothing from it and writes nothing to it."""
    store = open_memory_store(f"sqlite:///{tmp_path / 'm.sqlite'}")
    kind = Memory(store, {"notes": "shared/{session}"})
    mallory = Scope(user="token:mallory", tenant="token:mallory", session="s-1")
    await use(kind, "remember", {"key": "k", "text": "alice's note"}, 0, ALICE)
    for tool, arguments in (
        ("recall", {"query": "note"}),
        ("remember", {"key": "k", "text": "overwritten"}),
        ("forget", {"key": "k"}),
    ):
        with pytest.raises(NotAllowed, match="belongs to another tenant"):
            await use(kind, tool, arguments, 1, mallory)
    [kept] = await store.listed()
    assert (kept.text, kept.namespace) == ("alice's note", "shared/s-1")


def test_a_filled_value_cannot_add_a_level_or_name_another_place() -> None:
    sneaky = Scope(user="token:a/../tenant/acme", tenant="x/y", session="s%2F1")
    assert sneaky.fill(TEMPLATE, "notes") == "tenant/x%2Fy/user/token:a%2F..%2Ftenant%2Facme"
    assert sneaky.fill("ws/{session}", "notes") == "ws/s%252F1"
    with pytest.raises(ValueError, match="may name only"):
        MemorySource("tenant/{tenant}/{model_says}")


def test_a_spec_cannot_choose_a_namespace_or_an_embeddings_endpoint() -> None:
    with RecordingServer() as elsewhere:
        for entry in (
            {"kind": "memory", "name": "notes", "namespace": "tenant/acme/user/token:alice"},
            {"kind": "memory", "name": "notes", "base_url": elsewhere.url},
        ):
            with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
                AgentSpec.model_validate({"model": {"name": "m"}, "toolsets": [entry]})
    assert elsewhere.seen == []


async def test_a_call_naming_a_source_the_owner_did_not_register_is_refused(tmp_path: Path) -> None:
    kind = Memory(f"sqlite:///{tmp_path / 'm.sqlite'}", {"notes": TEMPLATE})
    forged = MemoryTool(source="everyone", tool="recall")
    with pytest.raises(Exception, match="no memory 'everyone' on this worker"):
        await kind.serve(forged, {"query": "x"}, call(0), ALICE)
    await kind.store.close()
