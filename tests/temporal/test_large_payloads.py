"""Large payloads by reference: with a payload store, a 20 MB tool result and a 5 MB
image pass through a session (and on across continue-as-new) while history keeps only
references, and the model sees what the docs say it sees: a result whole up to the
tool's ``max_result_chars``, cut with a marker beyond, and the image whole."""

from __future__ import annotations

import base64
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from durable_agent._activities.transcript_store import SqliteBackend, TranscriptStore
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client.results import SessionNotFoundError
from durable_agent._errors import PayloadTooLarge
from durable_agent._payloads.storage import (
    PayloadStorageError,
    payload_storage,
    with_payload_storage,
)
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire import transcript as transcript
from durable_agent._wire.messages import Message, UserMessage, image_part, text_part
from durable_agent.temporal import build_worker
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.conftest import started_on_free_port
from tests.support.agent_harness import LOCAL_DEVELOPMENT, spec_for, wait_for, worker_process

registry = Registry()
REPORT_BYTES = 20_000_000
IMAGE_BYTES = 5_000_000
END = "END-OF-REPORT"


def report(seed: str) -> str:
    line = f"{seed} row of the quarterly report\n"
    return (line * (REPORT_BYTES // len(line)))[: REPORT_BYTES - len(END)] + END


@tool(registry=registry, max_result_chars=25_000_000)
def fetch_report(seed: str) -> str:
    """The whole quarterly report (about 20 MB)."""
    return report(seed)


@tool(registry=registry)
def fetch_log(seed: str) -> str:
    """A 20 MB log; the model sees the first 100,000 characters."""
    return report(seed)


def image_url() -> str:
    pixels = bytes(range(256)) * (IMAGE_BYTES // 256)
    return "data:image/png;base64," + base64.b64encode(pixels).decode()


def stored_client(env: WorkflowEnvironment, store: Path | str) -> Client:
    """A client of the test server keeping large payloads in ``store`` (a directory or
    a store URL)."""
    storage = payload_storage(store if isinstance(store, str) else f"file://{store}")
    config = env.client.config()
    config["data_converter"] = with_payload_storage(env.client.data_converter, storage)
    return Client(**config)


def history_payload_sizes(history: Any) -> list[int]:
    """The size of every payload anywhere in a history's events."""
    sizes: list[int] = []

    def walk(message: Any) -> None:
        if isinstance(message, Payload):
            sizes.append(message.ByteSize())
            return
        for field, value in message.ListFields():
            if field.message_type is None:
                continue
            if hasattr(value, "ListFields"):
                walk(value)
            else:  # a repeated field, or a map (its values)
                for item in value.values() if hasattr(value, "values") else value:
                    walk(item)

    for event in history.events:
        walk(event)
    return sizes


@asynccontextmanager
async def stored_worker(
    env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> AsyncIterator[AgentClient]:
    """A worker with this module's tools, a payload store and a transcript store in
    ``tmp_path``; a client of it with the same payload store."""
    client = stored_client(env, tmp_path / "payloads")
    store = TranscriptStore(SqliteBackend(tmp_path / "t.sqlite"))
    async with build_worker(
        client,
        capabilities=LOCAL_DEVELOPMENT,
        task_queue=task_queue,
        registry=registry,
        transcripts=store,
    ):
        yield AgentClient(client, task_queue=task_queue)


async def an_image_described(client: Client, task_queue: str) -> None:
    """A session whose first message carries the 5 MB image, on a worker with
    ``client``'s store: the model sees the image whole, history keeps references."""
    url = image_url()
    question = UserMessage(content=[text_part("describe it"), image_part(url)])
    with ScriptedProvider([assistant_text("a chart")]) as provider:
        async with build_worker(client, capabilities=LOCAL_DEVELOPMENT, task_queue=task_queue):
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider), question)
            result = await agents.session(sid).result()
            history = await agents.temporal.get_workflow_handle(sid).fetch_history()
    assert result.status == "done"
    assert provider.bodies()[0]["messages"][-1]["content"][1]["image_url"]["url"] == url
    assert max(history_payload_sizes(history)) < 300_000


def tool_contents(body: Any) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def workflow_encodings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the messages of a megabyte or more that workflow code encodes or sizes
    (in temporalio's workflow threads), from now on."""
    seen: list[int] = []

    def watched(function: Callable[[Message], Any]) -> Callable[[Message], Any]:
        def call(message: Message) -> Any:
            content = getattr(message, "content", None)
            big = isinstance(content, str) and len(content) >= 1_000_000
            if big and threading.current_thread().name.startswith("temporal_workflow_"):
                seen.append(len(content))
            return function(message)

        return call

    for name in ("canonical_json", "payload_bytes"):
        monkeypatch.setattr(transcript, name, watched(getattr(transcript, name)))
    return seen


async def test_a_20_mb_result_and_a_5_mb_image_pass_with_history_bounded(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoded = workflow_encodings(monkeypatch)
    script = [
        assistant_calls(("fetch_report", {"seed": "north"})),
        assistant_calls(("fetch_log", {"seed": "south"})),
        assistant_text("read both"),
    ]
    url = image_url()
    question = UserMessage(content=[text_part("what is in this chart?"), image_part(url)])
    with ScriptedProvider(script) as provider:
        async with stored_worker(temporal_env, task_queue, tmp_path) as agents:
            spec = spec_for(provider, ["fetch_report", "fetch_log"])
            sid = await agents.start(spec, question)
            result = await agents.session(sid).result()
            assert result.status == "done", result
            messages = await agents.session(sid).messages()
            history = await agents.temporal.get_workflow_handle(sid).fetch_history()
    first, second, third = provider.bodies()
    # the model saw the image whole, the report whole, the log cut with the marker
    image = first["messages"][-1]["content"][1]["image_url"]["url"]
    assert image == url
    assert tool_contents(second) == [report("north")]
    cut = tool_contents(third)[1]
    assert cut.startswith(report("south")[:100_000])
    assert "[truncated by durable-agent: showing the first 100000 of 20000000" in cut
    # the transcript holds what the model saw
    roles = [m.role for m in messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert messages[0].content[1].image_url.url == url  # type: ignore[union-attr]
    assert messages[2].content == report("north")
    assert messages[4].content == cut
    # history holds references: no payload near its size, the whole far below one result
    sizes = history_payload_sizes(history)
    assert max(sizes) < 300_000, sorted(sizes)[-5:]
    recorded = b"".join(event.SerializeToString() for event in history.events)
    assert len(recorded) < 2_000_000, len(recorded)
    assert END.encode() not in recorded and url[-200:].encode() not in recorded
    stored = [p for p in (tmp_path / "payloads").rglob("*") if p.is_file()]
    assert stored and max(p.stat().st_size for p in stored) > REPORT_BYTES
    # the workflow joined the report to its chain by the digest its activity worked out:
    # its thread never encoded or sized it (only decoded it)
    assert encoded == [], encoded


async def test_a_long_answer_joins_the_array_by_the_digest_its_worker_worked_out(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model's answer of over a megabyte (or a reply of thousands of calls) comes with
    its digest and size, as a tool's result does: the workflow's thread decodes it and
    never encodes or sizes it, and the next call's worker finds the array it chained."""
    encoded = workflow_encodings(monkeypatch)
    answer = "".join(f"line {n}: all that was asked for.\n" for n in range(32_000))
    script = [assistant_text(answer), assistant_text("and a short one")]
    with ScriptedProvider(script) as provider:
        async with stored_worker(temporal_env, task_queue, tmp_path) as agents:
            spec = spec_for(provider, session={})
            whole = spec.model.model_copy(update={"stream": False})  # a stream's chunks: 5x
            sid = await agents.start(spec.model_copy(update={"model": whole}), "tell me all")
            await agents.session(sid).wait(after=1, timeout=60)
            index = await agents.session(sid).send("and in short?")
            await agents.session(sid).wait(after=index, timeout=60)
            messages = await agents.session(sid).messages()
            await agents.session(sid).end()
    assert len(answer) > 1_000_000
    assert [m.content for m in messages[1:]] == [answer, "and in short?", "and a short one"]
    assert provider.bodies()[1]["messages"][1]["content"] == answer
    assert encoded == [], encoded


async def test_big_messages_go_on_across_continue_as_new(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The array (the report among it) goes to the transcript store one message at a
    time where one is over the budget, the next run reads it back, and the model's next
    request holds the report whole."""
    script = [
        assistant_calls(("fetch_report", {"seed": "east"})),
        assistant_text("read it"),
        *[assistant_text(f"reply {n}") for n in range(12)],
    ]
    with ScriptedProvider(script) as provider:
        async with stored_worker(temporal_env, task_queue, tmp_path) as agents:
            session = {"continue_as_new_after_events": 20}
            spec = spec_for(provider, ["fetch_report"], session=session)
            sid = await agents.start(spec, "read the report")
            await agents.session(sid).wait(after=2, timeout=60)
            sent = 4
            while (await agents.session(sid).status()).runs < 2:
                index = await agents.session(sid).send(f"and now? ({sent})")
                await agents.session(sid).wait(after=index, timeout=60)
                sent += 1
            index = await agents.session(sid).send("one more")
            await agents.session(sid).wait(after=index, timeout=60)
            await agents.session(sid).end()
            history = await agents.temporal.get_workflow_handle(sid).fetch_history()
    last = provider.bodies()[-1]
    assert tool_contents(last) == [report("east")]
    started = history.events[0].workflow_execution_started_event_attributes
    assert started.continued_execution_run_id, "the last run continued an earlier one"
    assert max(history_payload_sizes(history)) < 300_000


async def test_a_worker_without_the_store_does_not_go_on_until_one_with_it_comes(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """A client that keeps the image in the payload store and a worker that cannot read
    it: the session does not start without the user's message (no model request), and
    a worker with the store then carries it out, the image whole."""
    client = stored_client(temporal_env, tmp_path / "payloads")
    url = image_url()
    question = UserMessage(content=[text_part("describe it"), image_part(url)])
    with ScriptedProvider([assistant_text("a chart")]) as provider:
        agents = AgentClient(client, task_queue=task_queue)
        spec = spec_for(provider)
        async with build_worker(
            temporal_env.client, capabilities=LOCAL_DEVELOPMENT, task_queue=task_queue
        ):
            sid = await agents.start(spec, question)
            await wait_for_failed_task(client, sid)
        assert provider.requests == []
        async with build_worker(client, capabilities=LOCAL_DEVELOPMENT, task_queue=task_queue):
            result = await agents.session(sid).result()
    assert result.status == "done" and result.final is not None
    assert result.final.content == "a chart"
    assert provider.bodies()[0]["messages"][-1]["content"][1]["image_url"]["url"] == url


async def wait_for_failed_task(client: Client, sid: str) -> None:
    async def failed() -> bool:
        history = await client.get_workflow_handle(sid).fetch_history()
        return any(e.HasField("workflow_task_failed_event_attributes") for e in history.events)

    await wait_for(failed, timeout=30)


def test_a_store_url_that_cannot_be_used_says_why() -> None:
    with pytest.raises(PayloadStorageError, match="s3://BUCKET"):
        payload_storage("ftp://host/dir")
    with pytest.raises(PayloadStorageError, match="name the bucket"):
        payload_storage("s3://")


@contextmanager
def serving(program: str, *args: str, port: str) -> Iterator[str]:
    """A server from this environment's ``bin`` on a free port of 127.0.0.1, given as
    ``port`` where ``args`` hold that word; its address."""
    command = [str(Path(sys.executable).parent / program), *args]
    server, number = started_on_free_port(
        lambda free: subprocess.Popen(
            [str(free) if word == port else word for word in command],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    )
    try:
        yield f"http://127.0.0.1:{number}"
    finally:
        server.terminate()
        server.wait()


@pytest.fixture
def s3_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (the S3 protocol over real HTTP; no AWS here), and
    the standard AWS variables pointing at it."""
    with serving("moto_server", "-H", "127.0.0.1", "-p", "PORT", port="PORT") as address:
        monkeypatch.setenv("AWS_ENDPOINT_URL", address)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        yield address


async def test_an_s3_bucket_holds_the_payloads(
    temporal_env: WorkflowEnvironment, task_queue: str, s3_server: str
) -> None:
    """``s3://BUCKET``: temporalio's S3 driver over aioboto3; the image goes to the
    bucket, history keeps the reference, the model sees the image whole."""
    import aioboto3

    async with aioboto3.Session().client("s3") as s3:
        await s3.create_bucket(Bucket="payloads")
        await an_image_described(stored_client(temporal_env, "s3://payloads"), task_queue)
        listed = await s3.list_objects_v2(Bucket="payloads")
    assert max(o["Size"] for o in listed["Contents"]) > IMAGE_BYTES


@pytest.fixture
def gcs_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A GCS emulator speaking the JSON API on 127.0.0.1 (no Google Cloud here), and the
    standard variable pointing gcloud-aio at it."""
    args = [
        "start",
        "--host",
        "127.0.0.1",
        "--port",
        "PORT",
        "--in-memory",
        "--default-bucket",
        "payloads",
    ]
    with serving("gcp-storage-emulator", *args, port="PORT") as address:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", address)
        yield address


async def test_a_gcs_bucket_holds_the_payloads(
    temporal_env: WorkflowEnvironment, task_queue: str, gcs_server: str
) -> None:
    """``gs://BUCKET``: temporalio's GCS driver over gcloud-aio."""
    await an_image_described(stored_client(temporal_env, "gs://payloads"), task_queue)
    async with httpx.AsyncClient() as http:
        listed = (await http.get(f"{gcs_server}/storage/v1/b/payloads/o")).json()
    assert max(int(item["size"]) for item in listed["items"]) > IMAGE_BYTES


async def test_a_sent_image_goes_by_reference_and_without_a_store_is_refused_first(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """``send`` (a query checks the message, then a signal carries it) with a payload
    store; without one, ``start`` and ``send`` refuse the image before sending anything,
    saying what to do, and the session never sees it."""
    client = stored_client(temporal_env, tmp_path / "payloads")
    url = image_url()
    picture = UserMessage(content=[text_part("and this one?"), image_part(url)])
    script = [assistant_text("hello"), assistant_text("a chart")]
    with ScriptedProvider(script) as provider:
        async with build_worker(client, capabilities=LOCAL_DEVELOPMENT, task_queue=task_queue):
            session = {"end_after_reply": False}
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider, session=session), "hi")
            await agents.session(sid).wait(timeout=30)
            index = await agents.session(sid).send(picture)
            await agents.session(sid).wait(after=index, timeout=60)
            plain = AgentClient(temporal_env.client, task_queue=task_queue)
            with pytest.raises(PayloadTooLarge, match="--payload-store"):
                await plain.session(sid).send(picture)
            with pytest.raises(PayloadTooLarge, match="session's start"):
                await plain.start(spec_for(provider), picture, session_id=f"{sid}-big")
            await agents.session(sid).end()
            messages = await agents.session(sid).messages()
            with pytest.raises(SessionNotFoundError):
                await plain.session(f"{sid}-big").status()
    assert provider.bodies()[1]["messages"][-1]["content"][1]["image_url"]["url"] == url
    assert len(provider.requests) == 2
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]


async def test_the_command_line_worker_takes_a_payload_store(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """``durable-agent worker`` with ``DURABLE_AGENT_PAYLOAD_STORE``, a client with the
    same directory."""
    directory = tmp_path / "payloads"
    client = stored_client(temporal_env, directory)
    url = image_url()
    question = UserMessage(content=[text_part("describe it"), image_part(url)])
    with (
        ScriptedProvider([assistant_text("a chart")]) as provider,
        worker_process(temporal_env, task_queue, DURABLE_AGENT_PAYLOAD_STORE=f"file://{directory}"),
    ):
        agents = AgentClient(client, task_queue=task_queue)
        result = await agents.session(await agents.start(spec_for(provider), question)).result()
    assert result.status == "done"
    assert provider.bodies()[0]["messages"][-1]["content"][1]["image_url"]["url"] == url


def test_a_worker_given_a_store_it_cannot_use_says_why_before_it_starts() -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "durable_agent._cli.main", "worker", "--payload-store", "ftp://x/y"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0
    assert "--payload-store: ftp://x/y: a payload store is file:///DIRECTORY" in refused.stderr
