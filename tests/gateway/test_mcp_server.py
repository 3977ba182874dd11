"""The MCP compatible endpoint (``durable-agent mcp-serve``) driven by the official ``mcp`` SDK's
client, against a real worker and dev server: the agents listed as tools, a call that
is a durable session (a tool on the way), progress notifications as it works, and the
typed answer as structured content; over stdio and over streamable HTTP, where the
gateway's tokens name the caller and the session is theirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.conftest import started_on_free_port
from tests.project.test_cli import address_of
from tests.support import cli_tools
from tests.support.agent_harness import running_worker

ROOT = Path(__file__).parent.parent.parent
registry = Registry([cli_tools.get_time])


def model(request: RecordedRequest) -> AssistantMessage:
    """The clock asks ``get_time``, then answers with the record; the echo says back."""
    messages = request.body["messages"]
    if "get_time" not in json.dumps(request.body.get("tools") or []):
        return assistant_text(f"you asked: {messages[-1]['content']}")
    if messages[-1]["role"] == "user":
        return assistant_calls(("get_time", {"city": "Tokyo"}))
    return assistant_text(json.dumps({"city": "Tokyo", "local_time": messages[-1]["content"]}))


def server_env(env: WorkflowEnvironment, provider: ScriptedProvider, **more: str) -> dict[str, str]:
    return {
        **os.environ,
        "TEMPORAL_ADDRESS": address_of(env),
        "MCP_DOOR_MODEL_URL": provider.base_url,
        **more,
    }


def command(task_queue: str, *more: str) -> list[str]:
    return [
        "-m",
        "durable_agent._cli.main",
        "mcp-serve",
        "--agents",
        "tests.support.mcp_agents",
        "--task-queue",
        task_queue,
        *more,
    ]


@contextmanager
def http_server(task_queue: str, env: dict[str, str]) -> Iterator[str]:
    """``mcp-serve --transport http`` on a free port: its URL."""
    process, port = started_on_free_port(
        lambda port: subprocess.Popen(
            [sys.executable, *command(task_queue, "--transport", "http", "--port", str(port))],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
        )
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


async def use(session: ClientSession) -> tuple[Any, Any, list[tuple[float, str]], Any]:
    """List the tools, call the clock (noting progress) and the echo."""
    await session.initialize()
    tools = await session.list_tools()
    progress: list[tuple[float, str]] = []

    async def noted(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message or ""))

    clock = await session.call_tool("clock", {"task": "time in Tokyo?"}, progress_callback=noted)
    echo = await session.call_tool("echo", {"task": "hello"})
    return tools, clock, progress, echo


async def test_agents_are_mcp_tools_over_stdio_with_progress_and_typed_answers(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider(responder=model) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            env = server_env(temporal_env, provider)
            params = StdioServerParameters(
                command=sys.executable, args=command(task_queue), env=env, cwd=ROOT
            )
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                tools, clock, progress, echo = await use(session)
            agents = AgentClient(client, task_queue=task_queue)
            session_id = progress[0][1].split(":")[0]
            array = await agents.session(session_id).messages()
    listed = {t.name: t for t in tools.tools}
    assert set(listed) == {"clock", "echo"}
    assert listed["clock"].input_schema["required"] == ["task"]
    assert set(listed["clock"].output_schema["properties"]) == {"city", "local_time"}
    assert clock.is_error is False
    assert clock.structured_content == {"city": "Tokyo", "local_time": "22:00"}
    said = [m for _, m in progress]
    assert [n for n, _ in progress] == list(range(1, len(progress) + 1))
    assert [s.split(": ", 1)[1] for s in said] == [
        "turn 1: asking scripted",
        "running get_time",
        "get_time done",
        "turn 2: asking scripted",
    ]
    assert [m.role for m in array][-3:] == ["assistant", "tool", "assistant"]  # a real session
    assert echo.content[0].text == "you asked: hello"
    assert len(provider.requests) == 3


async def test_over_http_the_gateway_tokens_name_the_caller(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    alice = "alice-token-0123456789"
    with ScriptedProvider(responder=model) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            env = server_env(temporal_env, provider, DURABLE_AGENT_GATEWAY_TOKENS=f"alice={alice}")
            with http_server(task_queue, env) as url:
                anonymous = httpx2.post(url, json={}, headers={"Accept": "application/json"})
                headers = {"Authorization": f"Bearer {alice}"}
                cross_site = httpx2.post(
                    url,
                    json={},
                    headers={
                        **headers,
                        "Accept": "application/json",
                        "Origin": "https://evil.example",
                    },
                )
                async with (
                    httpx2.AsyncClient(headers=headers, timeout=60) as http,
                    streamable_http_client(url, http_client=http) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    _, clock, progress, _ = await use(session)
            session_id = progress[0][1].split(":")[0]
            owner = await AgentClient(client, task_queue=task_queue).session(session_id).owner()
    assert anonymous.status_code == 401
    assert cross_site.status_code == 403  # a page on another site, with alice's token
    assert clock.structured_content == {"city": "Tokyo", "local_time": "22:00"}
    assert owner == "token:alice"
