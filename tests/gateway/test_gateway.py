"""``durable-agent serve`` over real HTTP: sessions started, steered and read through the
REST endpoints, followed as SSE (our events and the AG-UI encoding, resumed with
Last-Event-ID), conversations by update-with-start, and 4xx answers naming the field."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import EventType
from ag_ui.core.events import Event as AguiEvent
from pydantic import TypeAdapter
from temporalio.testing import WorkflowEnvironment

from durable_agent._client.sessions import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.conftest import started_on_free_port
from tests.support import cli_tools
from tests.support.agent_harness import record_history, running_worker, spec_for
from tests.support.gateway_harness import ROOT, SSE, gateway, read_sse

registry = Registry([cli_tools.get_time, cli_tools.wipe_cache])
agui_event: TypeAdapter[Any] = TypeAdapter(AguiEvent)


def address_of(env: WorkflowEnvironment) -> str:
    return str(env.client.service_client.config.target_host)


def spec_file(tmp_path: Path, provider: ScriptedProvider, **session: Any) -> Path:
    spec = spec_for(provider, ["wipe_cache", "get_time"], session=session)
    path = tmp_path / "spec.json"
    path.write_text(spec.model_dump_json())
    return path


async def events_until(
    http: httpx.AsyncClient, url: str, stop: str, headers: dict[str, str] | None = None
) -> list[SSE]:
    seen: list[SSE] = []
    async with http.stream("GET", url, headers=headers or {}) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for event in read_sse(response):
            seen.append(event)
            if (event.event or event.data.get("type")) == stop:
                return seen
    return seen


async def test_a_session_started_approved_and_read_through_the_gateway(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [
        assistant_calls(("wipe_cache", {"name": "tiles"}), ("wipe_cache", {"name": "maps"})),
        assistant_text("tiles cleared, maps kept"),
        assistant_text("bye"),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_file(tmp_path, provider, max_message_chars=50)
        async with running_worker(temporal_env, task_queue, registry):
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                    started = await http.post("/api/sessions", json={"message": "clear caches"})
                    assert started.status_code == 201, started.text
                    sid = started.json()["session_id"]
                    events = f"/api/sessions/{sid}/events"
                    asked = await events_until(http, events, "approval_requested")
                    first = asked[-1].data["approval"]["approval_id"]
                    asked = await events_until(
                        http, f"{events}?after={asked[-1].id}", "approval_requested"
                    )
                    second = asked[-1].data["approval"]["approval_id"]
                    ok = await http.post(
                        f"/api/sessions/{sid}/approvals/{first}/approve", json={"by": "ana"}
                    )
                    no = await http.post(
                        f"/api/sessions/{sid}/approvals/{second}/deny",
                        json={"by": "ana", "reason": "keep maps"},
                    )
                    again = await http.post(f"/api/sessions/{sid}/approvals/{second}/deny", json={})
                    answered = await events_until(http, events, "idle")
                    long = await http.post(f"/api/sessions/{sid}/messages", json={"text": "x" * 51})
                    empty = await http.post(f"/api/sessions/{sid}/messages", json={})
                    extra = await http.post(
                        f"/api/sessions/{sid}/messages", json={"text": "hi", "role": "system"}
                    )
                    bad_after = await http.get(f"{events}?after=soon")
                    missing = await http.get("/api/sessions/no-such-session/status")
                    sent = await http.post(f"/api/sessions/{sid}/messages", json={"text": "thanks"})
                    # resumed where the last read stopped, by Last-Event-ID
                    resumed = await events_until(
                        http, events, "idle", headers={"Last-Event-ID": answered[-1].id or ""}
                    )
                    status = (await http.get(f"/api/sessions/{sid}/status")).json()
                    ended = await http.post(f"/api/sessions/{sid}/end", json={"by": "ana"})
                    last = await events_until(http, f"{events}?after={resumed[-1].id}", "ended")
                    messages = (await http.get(f"/api/sessions/{sid}/messages")).json()
                    page = (await http.get(f"/api/sessions/{sid}/messages?from=1&limit=2")).json()
                    listed = (await http.get("/api/sessions?limit=200")).json()
    assert ok.status_code == 202 and no.status_code == 202
    assert again.status_code == 404 and again.json()["field"] == "approval_id", again.text
    assert long.status_code == 409 and "over the limit" in long.json()["error"]
    assert empty.status_code == 400 and empty.json()["field"] == "text"
    assert extra.status_code == 400 and extra.json()["field"] == "role"
    assert bad_after.status_code == 400 and bad_after.json()["field"] == "after"
    assert missing.status_code == 404 and "no session" in missing.json()["error"]
    assert sent.status_code == 202 and sent.json()["before"] == 5
    decided = [e.data for e in answered if e.event == "approval_decided"]
    assert {(d["approval_id"], d["record"]["decision"]) for d in decided} >= {
        (first, "approved"),
        (second, "denied"),
    }
    offsets = [int(e.id or -1) for e in resumed]
    assert offsets[0] == int(answered[-1].id or 0) + 1 and offsets == sorted(offsets)
    assert [e.data["message"]["content"] for e in resumed if e.event == "message_appended"] == [
        "thanks",
        "bye",
    ]
    assert status["phase"] == "idle" and status["message_count"] == 7
    assert ended.status_code == 202 and last[-1].event == "ended"
    roles = ["user", "assistant", "tool", "tool", "assistant", "user", "assistant"]
    assert [m["role"] for m in messages] == roles
    assert [m["role"] for m in page] == ["assistant", "tool"]
    assert messages[3]["approval"]["reason"] == "keep maps"
    assert any(s["session_id"] == sid and s["title"] == "clear caches" for s in listed)


async def test_conversations_and_the_agui_endpoint_start_or_continue_by_update_with_start(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [assistant_text("hello there"), assistant_text("still here"), assistant_text("third")]
    with ScriptedProvider(script) as provider:
        spec = spec_file(tmp_path, provider)
        async with running_worker(temporal_env, task_queue, registry):
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                    thread = f"thread-{task_queue}"
                    run = {
                        "threadId": thread,
                        "runId": "run-1",
                        "state": {},
                        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
                        "tools": [],
                        "context": [],
                        "forwardedProps": {},
                    }
                    agui: list[SSE] = []
                    async with http.stream("POST", "/api/agui", json=run) as response:
                        assert response.status_code == 200, await response.aread()
                        agui = [e async for e in read_sse(response)]
                    sid = f"conversation-{thread}"
                    second = await http.post(
                        f"/api/conversations/{thread}/messages", json={"text": "again"}
                    )
                    watched = await events_until(
                        http, f"/api/sessions/{sid}/events?format=agui", "RUN_FINISHED"
                    )
                    bad_run = await http.post("/api/agui", json={"threadId": thread})
                    bad_thread = await http.post(
                        "/api/conversations/has space/messages", json={"text": "x"}
                    )
                    listed = (await http.get("/api/sessions?limit=200")).json()
            handle = temporal_env.client.get_workflow_handle(sid)
            await handle.signal("end_session")
            await handle.result()
            await record_history(handle, "update_with_start")
    kinds = [e.data["type"] for e in agui]
    for event in agui:
        agui_event.validate_python(event.data)  # AG-UI's own event types accept each one
    assert kinds[0] == EventType.RUN_STARTED and agui[0].data["runId"] == "run-1"
    assert kinds[-1] == EventType.RUN_FINISHED and agui[-1].data["threadId"] == thread
    assert "TEXT_MESSAGE_START" in kinds and "TEXT_MESSAGE_END" in kinds
    text = "".join(e.data["delta"] for e in agui if e.data["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "hello there"
    assert second.status_code == 202 and second.json()["session_id"] == sid
    assert second.json()["before"] == 2, "the same session: two messages ahead of this one"
    for event in watched:
        agui_event.validate_python(event.data)
    assert watched[0].data["type"] == "RUN_STARTED"
    assert bad_run.status_code == 400 and bad_run.json()["field"] in ("runId", "messages")
    assert bad_thread.status_code == 400 and bad_thread.json()["field"] == "conversation_id"
    assert any(s["session_id"] == sid and s["title"] == "hi" for s in listed), listed


async def test_a_hundred_readers_each_get_every_event(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """100 SSE readers of one session (one shared poll in the gateway) each get every
    event of the reply, the same ones in the same order."""
    with ScriptedProvider([assistant_text("for everyone")]) as provider:
        spec = spec_file(tmp_path, provider)
        async with running_worker(temporal_env, task_queue, registry):
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                limits = httpx.Limits(max_connections=200)
                async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
                    sid = (await http.post("/api/sessions", json={})).json()["session_id"]
                    url = f"/api/sessions/{sid}/events"
                    readers = [asyncio.ensure_future(events_until(http, url, "idle"))]
                    await asyncio.sleep(1.0)  # the first one sees the session idle, waiting
                    readers += [
                        asyncio.ensure_future(events_until(http, f"{url}?after=0", "ended"))
                        for _ in range(100)
                    ]
                    await asyncio.sleep(1.0)
                    await http.post(f"/api/sessions/{sid}/messages", json={"text": "hi all"})
                    await asyncio.sleep(1.0)
                    await http.post(f"/api/sessions/{sid}/end", json={})
                    seen = await asyncio.wait_for(asyncio.gather(*readers), 60)
    everyone = seen[1:]
    first = [(e.id, e.event) for e in everyone[0]]
    assert first[-1][1] == "ended" and ("message_appended" in {k for _, k in first})
    assert all([(e.id, e.event) for e in other] == first for other in everyone)


async def test_a_reader_opens_its_stream_without_asking_the_worker(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """A reader's stream opens on the server's word that the session exists, not on a
    query: with no worker on the session's queue, the stream still opens (a query
    would wait out the client's 15 s and answer 503), and a session that does not
    exist is a 404. A hundred readers of one session used to make a hundred queries,
    queued behind its tasks; beside a second copy of the suite some waited past 15 s."""
    with ScriptedProvider([assistant_text("never asked")]) as provider:
        spec = spec_file(tmp_path, provider)
        agents = AgentClient(temporal_env.client, task_queue=task_queue)  # no worker
        sid = await agents.start(spec_for(provider, [], session={}), "anyone there?")
        with gateway(address_of(temporal_env), task_queue, spec) as base:
            async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                async with http.stream("GET", f"/api/sessions/{sid}/events?after=0") as opened:
                    status, kind = opened.status_code, opened.headers["content-type"]
                missing = await http.get("/api/sessions/no-such-session/events")
    assert status == 200 and kind.startswith("text/event-stream")
    assert missing.status_code == 404 and "no session" in missing.json()["error"]
    assert provider.requests == []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_a_stopped_gateway_ends_its_streams_and_exits_without_a_traceback(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path, signum: signal.Signals
) -> None:
    """A stop (a service manager's SIGTERM, a terminal's SIGINT) while a reader follows a
    session: the reader's stream ends, and the process exits with 128 + the signal after
    an orderly shutdown, with nothing on stderr (it used to tear the app down in the
    middle of its shutdown, with a traceback)."""
    with ScriptedProvider([assistant_text("hi")]) as provider:
        spec = spec_file(tmp_path, provider)
        env = {**os.environ, "TEMPORAL_ADDRESS": address_of(temporal_env)}
        env.pop("OPENAI_API_KEY", None)
        args = [sys.executable, "-m", "durable_agent._cli.main", "serve"]
        args += ["--task-queue", task_queue]
        errors = tmp_path / "stderr.txt"
        async with running_worker(temporal_env, task_queue, registry):
            with errors.open("w") as stderr:
                process, port = started_on_free_port(
                    lambda port: subprocess.Popen(
                        [*args, "--spec", str(spec), "--port", str(port)],
                        cwd=ROOT,
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=stderr,
                    )
                )
            try:
                async with httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{port}", timeout=60
                ) as http:
                    started = await http.post("/api/sessions", json={"message": "hi"})
                    sid = started.json()["session_id"]
                    seen: list[SSE] = []
                    async with http.stream("GET", f"/api/sessions/{sid}/events") as response:
                        assert response.status_code == 200
                        with contextlib.suppress(httpx.RemoteProtocolError, httpx.ReadError):
                            async for event in read_sse(response):
                                seen.append(event)
                                if event.event == "idle":  # the reply is in; the stream waits
                                    process.send_signal(signum)
                code = await asyncio.to_thread(process.wait, 30)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
    assert [e.event for e in seen].count("idle") == 1, seen
    assert code == 128 + signum
    assert errors.read_text() == ""
