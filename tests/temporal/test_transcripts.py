"""Transcript references: each message enters history once; workers rebuild the array
from their store (SQLite, PostgreSQL), and a lost store costs one full resend."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from durable_agent._activities.transcript_store import (
    PostgresBackend,
    SqliteBackend,
    TranscriptStore,
    open_transcript_store,
    transcript_scope,
)
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, user_message
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire import transcript as transcript_module
from durable_agent._wire.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from durable_agent._wire.transcript import (
    EMPTY_HASH,
    ROOT_V2,
    Transcript,
    canonical_json,
    chain_hash,
    content_hash,
    hash_messages,
    hash_version,
    payload_bytes,
)
from durable_agent.temporal import build_worker
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import LOCAL_DEVELOPMENT, spec_for
from tests.support.arrays import without_times
from tests.support.postgres_server import running_postgres

registry = Registry()


@tool(registry=registry)
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "x" * 200


@tool(registry=registry, approval="always")
def publish(page: int) -> str:
    """Publish a page (a person approves)."""
    return f"published {page}"


SCRIPT = [
    assistant_calls(("fetch", {"page": 1}), ("fetch", {"page": 2})),
    assistant_calls(("fetch", {"page": 3})),
    assistant_calls(("publish", {"page": 3})),
    assistant_calls(("fetch", {"page": 4})),
    assistant_text("published page 3 after reading four pages"),
]


def model_inputs(history: Any) -> list[dict[str, Any]]:
    """The decoded input of every call_model activity scheduled in a history."""
    found = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.activity_type.name == "call_model":
                found.append(json.loads(attributes.input.payloads[0].data))
    return found


async def _session(
    env: WorkflowEnvironment,
    task_queue: str,
    store: TranscriptStore,
    *,
    while_paused: Any = None,
) -> tuple[list[Any], WorkflowHandle[Any, Any], ScriptedProvider]:
    with ScriptedProvider(SCRIPT) as provider:
        async with build_worker(
            env.client,
            capabilities=LOCAL_DEVELOPMENT,
            task_queue=task_queue,
            registry=registry,
            transcripts=store,
        ):
            agents = AgentClient(env.client, task_queue=task_queue)
            spec = spec_for(provider, ["fetch", "publish"], session={"end_after_reply": True})
            sid = await agents.start(spec, "read pages 1-4, publish 3")
            waiting = await agents.session(sid).wait(timeout=30)
            assert waiting.kind == "approval"
            if while_paused is not None:
                await while_paused()
            await agents.session(sid).approve(waiting.pending[0].approval_id)
            await agents.session(sid).result()
            messages = await agents.session(sid).messages()
        return messages, env.client.get_workflow_handle(sid), provider


async def test_each_model_call_carries_only_new_messages(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    store = open_transcript_store(f"sqlite:///{tmp_path / 't.sqlite'}")
    messages, handle, provider = await _session(temporal_env, task_queue, store)
    inputs = model_inputs(await handle.fetch_history())
    assert len(inputs) == 5
    assert inputs[0].get("transcript") is None and len(inputs[0]["messages"]) == 1  # the user
    previous = 1
    for call in inputs[1:]:
        # the reference names everything up to and including the previous reply
        assert call["transcript"]["count"] == previous + 1
        new = call["messages"]
        # tool results go by reference: their activity's result already holds them
        assert new and all(set(m) == {"stored"} for m in new), new
        previous = call["transcript"]["count"] + len(new)
    assert "page 1: xxx" not in json.dumps(inputs)
    assert inputs[0]["setup"] and all(c.get("setup") is None for c in inputs[1:])
    # and the provider still received the whole conversation every time
    transcript = Transcript(messages, root=ROOT_V2)  # a new session's chain
    for k, request in enumerate(provider.requests):
        sent = request.body["messages"]
        upto = inputs[k]["transcript"]["count"] if inputs[k].get("transcript") else 0
        assert len(sent) == upto + len(inputs[k]["messages"])
        assert inputs[k]["head"] == transcript.hash_at(len(sent))
    assert [m["role"] for m in provider.requests[-1].body["messages"]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


async def test_a_wiped_store_costs_one_full_resend_and_changes_nothing(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    undisturbed, _, _ = await _session(temporal_env, task_queue, TranscriptStore())
    backend = SqliteBackend(tmp_path / "t.sqlite")
    store = TranscriptStore(backend)

    async def wipe() -> None:
        await backend.wipe()
        store.forget()

    messages, handle, provider = await _session(
        temporal_env, f"{task_queue}-2", store, while_paused=wipe
    )
    assert without_times(messages) == without_times(undisturbed)
    inputs = model_inputs(await handle.fetch_history())
    full = [k for k, call in enumerate(inputs) if call.get("transcript") is None]
    # call 3 (by reference) was refused by the wiped worker and sent again in full, once
    assert full == [0, 4], "exactly one full resend, right after the wipe"
    assert inputs[3]["transcript"] is not None and inputs[3]["head"] == inputs[4]["head"]
    assert len(inputs) == 6
    assert len(provider.requests) == 5  # the provider was never called twice for one turn
    after = inputs[5]
    assert after["transcript"]["count"] == len(inputs[4]["messages"]) + 1  # store re-seeded


async def test_a_new_worker_process_carries_on_from_the_shared_store(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """A deploy: the worker that started the session is gone; a fresh one (new caches,
    same SQLite file) serves the next calls by reference, with no refused call."""
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    with ScriptedProvider(SCRIPT) as provider:
        agents = AgentClient(temporal_env.client, task_queue=task_queue)
        spec = spec_for(provider, ["fetch", "publish"], session={"end_after_reply": True})
        async with build_worker(
            temporal_env.client,
            capabilities=LOCAL_DEVELOPMENT,
            task_queue=task_queue,
            registry=registry,
            transcripts=open_transcript_store(url),
        ):
            sid = await agents.start(spec, "read pages 1-4, publish 3")
            waiting = await agents.session(sid).wait(timeout=30)
        async with build_worker(
            temporal_env.client,
            capabilities=LOCAL_DEVELOPMENT,
            task_queue=task_queue,
            registry=registry,
            transcripts=open_transcript_store(url),
        ):
            await agents.session(sid).approve(waiting.pending[0].approval_id)
            await agents.session(sid).result()
    inputs = model_inputs(await agents.temporal.get_workflow_handle(sid).fetch_history())
    assert [c.get("transcript") is None for c in inputs] == [True, False, False, False, False]
    assert [c.get("setup") is not None for c in inputs] == [True, False, False, False, False]


async def test_store_rebuilds_prefixes_and_prunes_by_age(tmp_path: Path) -> None:
    store = TranscriptStore(SqliteBackend(tmp_path / "t.sqlite"))
    history = [user_message(f"m{k}") for k in range(5)]
    head, _ = await store.extend(EMPTY_HASH, (), history[:3])
    head2, _ = await store.extend(head, tuple(history[:3]), history[3:])
    assert head2 == hash_messages(history)
    store.forget()
    assert list(await store.load(head2) or []) == history
    assert list(await store.load(head) or []) == history[:3]
    assert await store.load("sha256:unknown") is None
    assert store.backend is not None
    assert await store.backend.prune(older_than_seconds=3600) == 0
    await asyncio.sleep(0.05)
    assert await store.backend.prune(older_than_seconds=0.01) == 5
    store.forget()
    assert await store.load(head2) is None  # pruned: the workflow will resend


def test_store_urls_are_checked() -> None:
    with pytest.raises(ValueError, match="unknown transcript store 'redis://x'"):
        open_transcript_store("redis://x")


@pytest.fixture(scope="module")
def postgres_url() -> Iterator[str]:
    with running_postgres() as url:
        yield url


async def test_postgres_store_against_a_real_server(postgres_url: str) -> None:
    import psycopg

    for _ in range(50):  # the server may still be starting up
        try:
            psycopg.connect(postgres_url).close()
            break
        except psycopg.OperationalError:
            await asyncio.sleep(0.1)
    store = open_transcript_store(postgres_url)
    assert isinstance(store.backend, PostgresBackend)
    history = [user_message("hello"), AssistantMessage(content="hi, how can I help?")]
    head, _ = await store.extend(EMPTY_HASH, (), history)
    other = TranscriptStore(PostgresBackend(postgres_url))  # another worker, same table
    assert list(await other.load(head) or []) == history
    assert await store.backend.prune(older_than_seconds=3600) == 0
    await store.backend.wipe()
    assert await TranscriptStore(PostgresBackend(postgres_url)).load(head) is None


async def test_sessions_run_on_the_postgres_store(
    temporal_env: WorkflowEnvironment, task_queue: str, postgres_url: str
) -> None:
    store = open_transcript_store(postgres_url)
    messages, handle, _ = await _session(temporal_env, task_queue, store)
    assert messages[-1].content == "published page 3 after reading four pages"
    inputs = model_inputs(await handle.fetch_history())
    assert [c.get("transcript") is None for c in inputs] == [True, False, False, False, False]


async def test_prune_transcripts_command(tmp_path: Path) -> None:
    from tests.project.test_cli import acli

    store = open_transcript_store(f"sqlite:///{tmp_path / 'transcripts.sqlite'}")
    await store.extend(EMPTY_HASH, (), [user_message("a"), user_message("b")])
    await store.put_message(AssistantMessage(content="c"))
    kept = await acli("prune-transcripts", "--data-dir", str(tmp_path), "--older-than-days", "1")
    await asyncio.sleep(0.05)
    gone = await acli(
        "prune-transcripts", "--data-dir", str(tmp_path), "--older-than-days", "0.0000001"
    )
    assert kept.returncode == 0 and "removed 0 stored messages" in kept.stdout
    assert gone.returncode == 0 and "removed 3 stored messages" in gone.stdout


async def test_each_session_reads_only_its_own_transcripts(tmp_path: Path) -> None:
    """A reference to another session's messages (its chain hash, a tool result's key)
    finds nothing, in the cache or the backend: every key is scoped by the session the
    activity works for."""
    store = open_transcript_store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    secret = UserMessage(content="alice's account number is 1234")

    async def as_session(session: str, work: Any) -> Any:
        scope = transcript_scope.set(f"default/{session}")
        try:
            return await work()
        finally:
            transcript_scope.reset(scope)

    head, _ = await as_session("alice", lambda: store.extend(EMPTY_HASH, (), [secret]))
    key = await as_session("alice", lambda: store.put_message(secret))
    store.forget()  # the backend alone, then the cache, must keep them apart
    assert await as_session("mallory", lambda: store.load(head)) is None
    assert await as_session("mallory", lambda: store.load_message(key)) is None
    assert await as_session("alice", lambda: store.load(head)) == (secret,)
    assert await as_session("mallory", lambda: store.load(head)) is None  # cached for alice
    assert await as_session("alice", lambda: store.load_message(key)) == secret


def test_the_chain_and_the_sizes_are_what_they_always_were() -> None:
    """The transcript hashes and sizes without joined or re-encoded copies; the values
    are the ones stored forever: the defining formulas, over text of every width."""
    messages: list[Message] = [
        UserMessage(content="plain"),
        UserMessage(content="é ü " * 50 + '😀 emoji, and \\ " \n escapes'),
        AssistantMessage(
            content="",
            tool_calls=[ToolCall(id="c1", function=FunctionCall(name="f", arguments='{"k": 1}'))],
        ),
        ToolMessage(tool_call_id="c1", content="中文 result", tool_name="f"),
    ]
    transcript = Transcript(messages)
    previous = EMPTY_HASH
    for k, message in enumerate(messages):
        encoded = canonical_json(message)
        expected = hashlib.sha256(f"{previous}\n{encoded}".encode()).hexdigest()[:32]
        assert transcript.hash_at(k + 1) == expected == chain_hash(previous, encoded)
        assert transcript.content_hash_at(k) == content_hash(message)
        size = len(message.model_dump_json().encode()) + 1
        assert payload_bytes(message) == size
        assert transcript.json_bytes(k, k + 1) == size
        previous = expected


def test_results_encoded_ahead_hash_and_size_as_any_other() -> None:
    """Tool results encoded as they arrive, then appended (one as a copy that changed,
    as a result the loop stamps is): the values are the defining formulas' all the same."""
    asked = AssistantMessage(content="", tool_calls=[])
    results = [ToolMessage(tool_call_id=f"c{k}", content=f"résultat {k}") for k in range(3)]
    transcript = Transcript([UserMessage(content="go"), asked])
    for result in results:
        transcript.encode_ahead(result)
    stamped = results[1].model_copy(update={"content": "changed after it was encoded"})
    transcript.extend([results[0], stamped, results[2]])
    plain = [UserMessage(content="go"), asked, results[0], stamped, results[2]]
    assert transcript.head == hash_messages(plain)
    assert [transcript.content_hash_at(k) for k in range(5)] == [content_hash(m) for m in plain]
    assert transcript.json_bytes() == sum(payload_bytes(m) for m in plain)
    assert transcript.json_bytes(3, 4) == len(stamped.model_dump_json().encode()) + 1


def test_a_messages_size_is_what_the_converter_writes_whether_known_ahead_or_not() -> None:
    """``size_of`` (what a page of the ``messages`` query and a live event are sized by)
    is ``payload_bytes`` before the transcript has sized a message, for a message encoded
    ahead, and once sized, where it is not encoded again."""
    results = [ToolMessage(tool_call_id=f"c{k}", content="é" * (k + 1) * 100) for k in range(3)]
    transcript = Transcript([UserMessage(content="go")])
    transcript.encode_ahead(results[0])
    transcript.extend(results)
    sizes = [payload_bytes(m) for m in transcript]
    assert [transcript.size_of(k) for k in range(4)] == sizes  # none sized yet
    transcript.json_bytes(0, 2)  # the first two sized; the result encoded ahead is taken
    assert [transcript.size_of(k) for k in range(4)] == sizes
    transcript.json_bytes()
    assert [transcript.size_of(k) for k in range(4)] == sizes


async def test_kept_results_chain_from_the_json_they_were_stored_as(tmp_path: Path) -> None:
    """A tool result kept by its activity is chained by the model call from the JSON it
    was stored as; the rows and the head are the defining formulas' all the same, also
    for a result kept twice and once the kept ones have been let go."""
    store = TranscriptStore(SqliteBackend(tmp_path / "t.sqlite"), cache_size=2)
    results = [ToolMessage(tool_call_id=f"c{k}", content=f"résultat {k}") for k in range(12)]
    keys = [await store.put_message(r) for r in results]
    assert keys == [content_hash(r) for r in results]
    again = results[0].model_copy()  # the same content, kept a second time
    assert await store.put_message(again) == keys[0]
    loaded = [await store.load_message(k) for k in keys]
    assert loaded[1] is results[1]  # as the model call finds it: the object kept
    head, _ = await store.extend(EMPTY_HASH, (), [m for m in loaded if m is not None])
    assert head == hash_messages(results)
    store.forget()
    assert list(await store.load(head) or []) == results
    assert store.backend is not None
    rows = await store.backend.load(head)
    assert sorted(m for *_, m in rows) == sorted(canonical_json(r) for r in results)
    # bounded with the kept messages (eight times the cache): none outlives its message
    for k in range(20):
        await store.put_message(ToolMessage(tool_call_id=f"d{k}", content=str(k)))
    assert len(store._single_json) == len(store._singles) == 16


def test_the_second_chain_links_content_hashes_and_names_itself() -> None:
    """A new session's chain: each link hashes the one before with the message's content
    hash; its hashes say which chain they are of, and the store's, the workflow's and
    the formula's agree."""
    messages: list[Message] = [
        UserMessage(content="plain"),
        ToolMessage(tool_call_id="c1", content='中文 result \n \\ "', tool_name="f"),
    ]
    transcript = Transcript(messages, root=ROOT_V2)
    previous = ROOT_V2
    for k, message in enumerate(messages):
        digest = content_hash(message)
        expected = "v" + hashlib.sha256(f"{previous}\n{digest}".encode()).hexdigest()[:31]
        assert (
            transcript.hash_at(k + 1) == expected == chain_hash(previous, canonical_json(message))
        )
        assert transcript.content_hash_at(k) == digest
        assert transcript.json_bytes(k, k + 1) == payload_bytes(message)
        previous = expected
    assert [hash_version(h) for h in (ROOT_V2, transcript.head)] == [2, 2]
    assert hash_version(EMPTY_HASH) == hash_version(hash_messages(messages)) == 1
    assert transcript.head == hash_messages(messages, ROOT_V2) != hash_messages(messages)
    assert len(transcript.head) == len(hash_messages(messages)) == 32


def test_a_result_told_of_with_its_digest_is_never_encoded_in_the_second_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a worker worked out of a result (its digest and size) is all the version-2 hash chain
    needs: the transcript never encodes it, and its values are the encoded ones. The
    first chain still encodes it (its links hash the JSON), but hashes it once."""
    big = ToolMessage(tool_call_id="c1", content="row\n" * 100_000, tool_name="report")
    before = UserMessage(content="read it")
    digest, size = content_hash(big), payload_bytes(big)
    expected = Transcript([before, big], root=ROOT_V2)
    values = (expected.head, expected.content_hash_at(1), expected.json_bytes())
    encoded: list[int] = []

    def counted(message: Message) -> str:
        encoded.append(len(getattr(message, "content", "") or ""))
        return canonical_json(message)

    def sized(message: Message) -> int:
        encoded.append(len(getattr(message, "content", "") or ""))
        return payload_bytes(message)

    monkeypatch.setattr(transcript_module, "canonical_json", counted)
    monkeypatch.setattr(transcript_module, "payload_bytes", sized)
    told = Transcript([before], root=ROOT_V2)
    told.encode_ahead(big, digest, size)
    told.encode_ahead(big)  # as the watcher does after: told of already, nothing more
    told.append(big)
    assert (told.head, told.content_hash_at(1), told.json_bytes()) == values
    assert big.content and len(big.content) not in encoded, encoded
    assert encoded, "the message not told of was encoded"
    encoded.clear()
    first = Transcript([before], root=EMPTY_HASH)
    first.encode_ahead(big, digest, size)
    first.append(big)
    head = first.head
    assert encoded.count(len(big.content)) == 1  # the chain's JSON, not the size or digest
    assert head == hash_messages([before, big])


async def test_the_store_keeps_and_reads_back_a_second_chain(tmp_path: Path) -> None:
    """A chain from the second root is stored as the first is, read back whole from the
    backend by a store that never saw it, and told apart from the first."""
    messages = [user_message("a"), AssistantMessage(content="b"), user_message("c")]
    writer = TranscriptStore(SqliteBackend(tmp_path / "t.sqlite"))
    head, _ = await writer.extend(ROOT_V2, (), messages[:2])
    head, _ = await writer.extend(head, tuple(messages[:2]), messages[2:])
    assert head == Transcript(messages, root=ROOT_V2).head
    reader = TranscriptStore(SqliteBackend(tmp_path / "t.sqlite"))
    assert list(await reader.load(head) or []) == messages
    assert await reader.load(ROOT_V2) == ()
    assert await reader.load(hash_messages(messages)) is None  # the first chain's: not kept
