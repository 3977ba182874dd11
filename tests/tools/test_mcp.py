"""MCP tools on the real server: a server built with the official SDK (over stdio and
over streamable HTTP) and an official reference server installed as a package
(``mcp-server-time``), listed once at start, called one activity per call."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.temporal._local import free_port
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.conftest import wait_for_port
from tests.support.agent_harness import KILL_HEARTBEAT_SECONDS, cli_json, running_worker, spec_for

ROOT = Path(__file__).parent.parent.parent
NOTES_STDIO = {
    "name": "notes",
    "command": sys.executable,
    "args": ["-m", "tests.support.mcp_notes_server", "stdio"],
    "env": ["NOTES_LEDGER"],
}
TIME = {
    "name": "time",
    "command": sys.executable,
    "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    "allowed_tools": ["get_current_time"],
}


async def run_session(
    env: WorkflowEnvironment, task_queue: str, servers: list[dict[str, Any]], script: list[Any]
) -> tuple[Any, list[Any], ScriptedProvider]:
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, [], mcp_servers=servers)
        async with running_worker(env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "take a note and tell the time")
            result = await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
    return (result, session), messages, provider


async def test_stdio_servers_sdk_built_and_reference(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ledger = tmp_path / "notes.txt"
    monkeypatch.setenv("NOTES_LEDGER", str(ledger))
    script = [
        assistant_calls(
            ("notes_add_note", {"text": "buy milk"}),
            ("time_get_current_time", {"timezone": "Europe/Oslo"}),
            ("notes_broken", {"reason": "on purpose"}),
        ),
        assistant_text("Noted; it is morning in Oslo."),
    ]
    (result, session), messages, provider = await run_session(
        temporal_env, task_queue, [NOTES_STDIO, TIME], script
    )
    assert result.status == "done"
    note, clock, broken = [m for m in messages if isinstance(m, ToolMessage)]
    assert note.content == "noted: buy milk" and not note.is_error
    assert json.loads(clock.content)["timezone"] == "Europe/Oslo"
    assert broken.is_error and "broken" in broken.content
    # the idempotency key reached the server in the call's _meta
    assert ledger.read_text() == f"{session}:1:0 buy milk\n"
    # listed once, prefixed, filtered; projected like any tool
    tools = {t["function"]["name"]: t["function"] for t in provider.requests[0].body["tools"]}
    assert set(tools) == {
        "notes_add_note",
        "notes_slow_note",
        "notes_broken",
        "time_get_current_time",
    }
    assert tools["notes_add_note"]["parameters"]["properties"]["text"]["type"] == "string"


async def test_a_streamable_http_server(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "notes.txt"
    port = free_port()
    server = await asyncio.to_thread(
        subprocess.Popen,
        [sys.executable, "-m", "tests.support.mcp_notes_server", "http", str(port)],
        cwd=ROOT,
        env={**os.environ, "NOTES_LEDGER": str(ledger)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await asyncio.to_thread(wait_for_port, port, server)
        http = {"name": "notes", "url": f"http://127.0.0.1:{port}/mcp", "prefix": ""}
        script = [assistant_calls(("add_note", {"text": "over HTTP"})), assistant_text("ok")]
        (result, session), messages, _ = await run_session(temporal_env, task_queue, [http], script)
    finally:
        server.terminate()
        await asyncio.to_thread(server.wait, 10)
    assert result.status == "done"
    [note] = [m for m in messages if isinstance(m, ToolMessage)]
    assert note.content == "noted: over HTTP"
    assert ledger.read_text() == f"{session}:1:0 over HTTP\n"


@pytest.mark.parametrize(
    ("server", "words"),
    [
        ({"name": "ghost", "command": "/nonexistent/mcp-server"}, "MCP server 'ghost'"),
        ({"name": "gone", "url": "http://127.0.0.1:9/mcp"}, "MCP server 'gone'"),
        ({**TIME, "allowed_tools": ["teleport"]}, "allowed_tools names tools it does not have"),
    ],
    ids=["no such command", "nothing listening", "unknown allowed tool"],
)
async def test_a_server_that_cannot_start_fails_the_session_at_once(
    temporal_env: WorkflowEnvironment, task_queue: str, server: dict[str, Any], words: str
) -> None:
    with ScriptedProvider([assistant_text("never")]) as provider:
        spec = spec_for(provider, [], mcp_servers=[server])
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "hello")
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(agents.session(session).result(), 60)
    cause = str(failed.value.cause)
    assert words in cause, cause
    assert not provider.requests


async def test_a_worker_killed_during_an_mcp_call(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """SIGKILL the worker while the call runs: another worker connects afresh and the
    session completes with the array it would have had; the server, reading the
    idempotency key from ``_meta``, makes the note once."""
    from tests.temporal.test_chaos import WorkerPool

    ledger = tmp_path / "notes.txt"
    address = temporal_env.client.service_client.config.target_host
    pool = WorkerPool(
        address, "mcp-kill", tmp_path / "unused.txt", "memory:", NOTES_LEDGER=str(ledger)
    )
    script = [assistant_calls(("notes_slow_note", {"text": "survive"})), assistant_text("ok")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(
            provider,
            [],
            mcp_servers=[NOTES_STDIO],
            session={
                "end_after_reply": True,
                "heartbeat_timeout_seconds": KILL_HEARTBEAT_SECONDS,
            },
        )
        await asyncio.to_thread(pool.start)
        try:
            agents = AgentClient(temporal_env.client, task_queue="mcp-kill")
            session = await agents.start(spec, "note it")
            for _ in range(200):  # until the call is running on the server
                if ledger.exists() and "start" in ledger.read_text():
                    break
                await asyncio.sleep(0.05)
            await asyncio.to_thread(pool.kill)  # ...and a fresh worker takes over
            result = await asyncio.wait_for(agents.session(session).result(), 90)
            messages = await agents.session(session).messages()
            shown = await cli_json(temporal_env, "workflow", "show", "--workflow-id", session)
        finally:
            pool.stop()
    started = [
        e["activityTaskStartedEventAttributes"]
        for e in shown["events"]
        if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_STARTED"
    ]
    assert any(a.get("attempt", 1) >= 2 for a in started), "the call was delivered again"
    assert result.status == "done" and result.final is not None
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    [note] = [m for m in messages if isinstance(m, ToolMessage)]
    assert note.content == "noted: survive" and not note.is_error
    notes = [line for line in ledger.read_text().splitlines() if not line.startswith("start")]
    assert notes == [f"{session}:1:0 survive"], ledger.read_text()


def test_content_that_is_not_text_is_marked_never_dropped() -> None:
    from types import SimpleNamespace as Part

    from durable_agent._tools.mcp_servers import result_text

    result = Part(
        content=[
            Part(type="text", text="chart below"),
            Part(type="image", mime_type="image/png", data="iVBOR"),
            Part(type="resource_link", uri="file:///tmp/report.pdf"),
            Part(type="embedded_thing"),
        ],
        structured_content=None,
    )
    assert result_text(result).splitlines() == [
        "chart below",
        "[image image/png, not shown]",
        "[resource file:///tmp/report.pdf]",
        "[embedded_thing content, not shown]",
    ]
    structured = Part(content=[], structured_content={"temp": 3})
    assert result_text(structured) == '{"temp": 3}'


async def test_a_tool_whose_schema_is_not_an_object_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The official SDK's servers always describe objects, so a stand-in session lists
    a tool that takes a bare string."""
    from contextlib import asynccontextmanager
    from types import SimpleNamespace

    import durable_agent._tools.mcp_servers as mcp_module
    from durable_agent._spec.document import McpServerSpec
    from durable_agent._tools.mcp_servers import McpServerError, list_server_tools

    class Listing:
        async def list_tools(self) -> Any:
            tool = SimpleNamespace(name="shout", description="", input_schema={"type": "string"})
            return SimpleNamespace(tools=[tool])

    @asynccontextmanager
    async def connected(server: Any) -> Any:
        yield Listing()

    monkeypatch.setattr(mcp_module, "connected", connected)
    server = McpServerSpec(name="odd", command="unused")
    with pytest.raises(McpServerError, match=r"tool 'shout' takes 'string', not an object"):
        await list_server_tools(server)
