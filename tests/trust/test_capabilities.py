"""The worker owns what a session may do: each hostile spec is refused at start and has
no effect (no process started, no request made, no file read, no call routed), on the
paths around the entry point too (sub-agents, swarm agents, the ``temporal`` CLI, a forged
continue-as-new input, a worker whose policy is stricter than the one that started the
session); and what the worker registered is used by name."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from durable_agent._workflows.continuation import ContinuedInput
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._session import SessionState
from durable_agent._spec.document import AgentSpec, McpServerSpec, OpenApiSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.capabilities import Capabilities, SecretGrant, SpecPolicy
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import (
    record_history,
    running_worker,
    spec_for,
    temporal_cli,
    wait_for,
    worker_process,
)
from tests.support.gateway_harness import gateway
from tests.support.openapi_service import OrdersService
from tests.support.recording_server import RecordingServer
from tests.tools.test_mcp import NOTES_STDIO

SECRET = "DURABLE_TEST_WORKER_SECRET"
ROOT = Path(__file__).parent.parent.parent


def registered(provider: ScriptedProvider, **more: Any) -> Capabilities:
    """A strict worker's registries: the scripted model (the endpoint ``spec_for``
    writes inline is this one, so it is admitted), and ``more``."""
    endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
    return Capabilities(models={"scripted": endpoint}, **more)


def marker_command(marker: Path) -> dict[str, Any]:
    """An MCP "server" whose start would leave a file behind."""
    code = f"open({str(marker)!r}, 'w').write('ran')"
    return {"name": "evil", "command": sys.executable, "args": ["-c", code], "env": [SECRET]}


async def refused(
    env: WorkflowEnvironment,
    task_queue: str,
    spec: AgentSpec,
    capabilities: Capabilities,
    registry: Registry | None = None,
) -> str:
    """Start ``spec`` on a worker with ``capabilities``; the session's failure text."""
    async with running_worker(
        env, task_queue, registry or Registry(), capabilities=capabilities
    ) as client:
        agents = AgentClient(client, task_queue=task_queue)
        session = await agents.start(spec, "hello")
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(agents.session(session).result(), 60)
    return str(failed.value.cause)


foreign_calls: list[str] = []
foreign = Registry()


@tool(registry=foreign)
def stock(item: str) -> str:
    """How many of an item are in stock."""
    foreign_calls.append(item)
    return "12"


def fifo(tmp_path: Path) -> Path:
    """A named pipe: a reader blocks in open() until a writer comes, so a worker that
    tried to read it would still be waiting there."""
    path = tmp_path / "worker-file"
    os.mkfifo(path)
    return path


def nobody_reading(path: Path) -> bool:
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as error:
        return error.errno == errno.ENXIO  # no process has it open for reading
    os.close(descriptor)
    return False


@pytest.mark.parametrize("kind", ["command", "variable", "internal_url", "file", "queue", "secret"])
async def test_a_hostile_spec_is_refused_at_start_and_has_no_effect(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    kind: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET, "s3cr3t-value")
    marker, pipe = tmp_path / "ran", fifo(tmp_path)
    foreign_calls.clear()
    foreign_queue = f"{task_queue}-payments"
    with ScriptedProvider([assistant_text("never")]) as provider, RecordingServer() as host:
        hostile: dict[str, dict[str, Any]] = {
            "command": {"mcp_servers": [marker_command(marker)]},
            "variable": {
                "model": {"name": "m", "endpoint": {"base_url": host.url, "api_key_env": SECRET}}
            },
            "internal_url": {
                "openapi": [
                    {
                        "name": "meta",
                        "document": f"{host.url}/doc.json",
                        "headers": {"X-Key": SECRET},
                    }
                ]
            },
            "file": {"openapi": [{"name": "local", "document": str(pipe)}]},
            "queue": {"tools": [{"name": "stock", "task_queue": foreign_queue}]},
            "secret": {"secrets": [SECRET], "context": {"key": f"{{{{secret:{SECRET}}}}}"}},
        }
        fields = hostile[kind]
        spec = spec_for(provider, **{k: v for k, v in fields.items() if k != "model"})
        if "model" in fields:
            spec = spec.model_copy(update={"model": spec.model.model_validate(fields["model"])})
        async with running_worker(temporal_env, foreign_queue, foreign):  # a pool it aims at
            text = await refused(
                temporal_env, task_queue, spec, registered(provider), registry=foreign
            )
    assert "does not admit the session's spec" in text, text
    expected = {
        "command": "toolsets[evil]: MCP server 'evil': a spec may not carry a command",
        "variable": "model.endpoint: model endpoint http://127.0.0.1",
        "internal_url": "toolsets[meta]: OpenAPI service 'meta': a spec may not carry its document",
        "file": "toolsets[local]: OpenAPI service 'local': a spec may not carry its document",
        "queue": f"tools[stock].task_queue: {foreign_queue!r} is not a task queue",
        "secret": f"secrets: {SECRET!r} is not registered on this worker (registered: none)",
    }[kind]
    assert expected in text, text
    assert "s3cr3t-value" not in text
    # the effects: nothing started, requested, read or routed; the model never asked
    assert not marker.exists()
    assert host.seen == []
    assert nobody_reading(pipe)
    assert foreign_calls == []
    assert provider.requests == []


async def test_a_policy_that_allows_urls_keeps_private_addresses_from_specs(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inline endpoints and services allowed, the private network not: loopback (by
    address and by name), link-local (cloud metadata) and private ranges are refused
    before any request is sent."""
    monkeypatch.setenv(SECRET, "s3cr3t-value")
    policy = SpecPolicy(inline_endpoints=True, inline_sources=["openapi", "mcp"])
    with ScriptedProvider([assistant_text("never")]) as provider, RecordingServer() as host:
        port = host.url.rsplit(":", 1)[1]
        spec = spec_for(
            provider,
            openapi=[
                {"name": "metadata", "document": "http://169.254.169.254/latest/meta-data"},
                {"name": "byname", "document": f"http://localhost:{port}/doc.json"},
                {"name": "lan", "document": "http://10.1.2.3/doc.json"},
            ],
            mcp_servers=[{"name": "v6", "url": f"http://[::ffff:127.0.0.1]:{port}/mcp"}],
        )
        endpoint = ProviderEndpoint(base_url=host.url, api_key_env=SECRET)
        spec = spec.model_copy(
            update={"model": spec.model.model_copy(update={"endpoint": endpoint})}
        )
        text = await refused(temporal_env, task_queue, spec, Capabilities(policy=policy))
    for words in (
        f"model.endpoint: '{host.url}' reaches a loopback address (127.0.0.1)",
        "toolsets[metadata]: 'http://169.254.169.254/latest/meta-data' reaches a link-local",
        f"toolsets[byname]: 'http://localhost:{port}/doc.json' reaches a loopback address",
        "toolsets[lan]: 'http://10.1.2.3/doc.json' reaches a private address",
        "toolsets[v6]:",
    ):
        assert words in text, (words, text)
    assert host.seen == [] and provider.requests == []


async def test_the_paths_around_the_door_are_guarded_too(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """A sub-agent's spec, a swarm agent's model, a start by the stock ``temporal``
    CLI and a forged continue-as-new input are all admitted by the same rules."""
    marker = tmp_path / "ran"
    with ScriptedProvider([assistant_text("never")]) as provider, RecordingServer() as host:
        capabilities = registered(provider)
        child = spec_for(provider, mcp_servers=[marker_command(marker)]).model_dump(mode="json")
        nested = spec_for(
            provider, agents=[{"name": "helper", "description": "helps", "spec": child}]
        )
        text = await refused(temporal_env, task_queue, nested, capabilities)
        assert "agents[helper].toolsets[evil]: MCP server 'evil': a spec may not" in text

        swarm = spec_for(
            provider,
            swarm={
                "agents": [
                    {"name": "triage"},
                    {"name": "billing", "model": {"name": "m", "endpoint": {"base_url": host.url}}},
                ]
            },
        )
        text = await refused(temporal_env, task_queue, swarm, capabilities)
        assert f"swarm.agents[billing].model.endpoint: model endpoint {host.url}" in text

        hostile = spec_for(provider, mcp_servers=[marker_command(marker)])
        async with running_worker(
            temporal_env, task_queue, Registry(), capabilities=capabilities
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            by_cli = f"cli-{uuid.uuid4().hex[:8]}"
            payload = {"spec": hostile.model_dump(mode="json"), "message": "hi"}
            await asyncio.to_thread(
                temporal_cli,
                temporal_env,
                "workflow",
                "start",
                "--type",
                "AgentWorkflow",
                "--task-queue",
                task_queue,
                "--workflow-id",
                by_cli,
                "--input",
                __import__("json").dumps(payload),
            )
            forged = ContinuedInput(spec=hostile, carried=SessionState())
            handle = await client.start_workflow(
                "AgentWorkflow", forged, id=f"forged-{uuid.uuid4().hex[:8]}", task_queue=task_queue
            )
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(agents.session(by_cli).result(), 60)
            assert "toolsets[evil]" in str(failed.value.cause), failed.value.cause
            # a first run that carries state is refused before admission is even asked
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(agents.session(handle.id).result(), 60)
            assert "carried state (grants, decisions, messages) is taken only from" in str(
                failed.value.cause
            ), failed.value.cause
            await record_history(handle, "admission_refused")
    assert not marker.exists() and host.seen == [] and provider.requests == []


async def started_by_a_trusting_worker(
    env: WorkflowEnvironment, task_queue: str, provider: ScriptedProvider
) -> str:
    """A conversation with an inline MCP server (the notes server), started and
    answered once by a worker of the local-development policy; its id."""
    spec = spec_for(provider, mcp_servers=[NOTES_STDIO], session={})
    async with running_worker(env, task_queue, Registry()) as client:
        agents = AgentClient(client, task_queue=task_queue)
        session = await agents.start(spec, "get ready")
        await agents.session(session).wait()
    return session


async def test_a_stricter_worker_refuses_what_a_session_started_elsewhere_carries(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Admission is not the only check: a session started on a trusting worker, then
    carried on by a strict one, gets no model call and no MCP process from it."""
    ledger = tmp_path / "notes.txt"
    monkeypatch.setenv("NOTES_LEDGER", str(ledger))
    script = [
        assistant_text("ready"),
        assistant_calls(("notes_add_note", {"text": "on the strict worker"})),
        assistant_text("never sent"),
    ]
    with ScriptedProvider(script) as provider:
        session = await started_by_a_trusting_worker(temporal_env, task_queue, provider)
        assert len(provider.requests) == 1
        # the same session, now on a worker that registered only another endpoint name
        strict = Capabilities(models={"other": ProviderEndpoint()})
        async with running_worker(
            temporal_env, task_queue, Registry(), capabilities=strict
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            await agents.session(session).send("take a note")

            async def turn_failed() -> str | None:
                return (await agents.session(session).status()).last_error

            error = await wait_for(turn_failed, timeout=60)
    assert "is not one this worker registered" in error, error
    assert len(provider.requests) == 1  # the second turn's request was never made
    assert not ledger.exists()


async def test_an_mcp_call_carried_from_a_trusting_worker_is_not_run_by_a_strict_one(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tool list was resolved (by a trusting worker) with an inline MCP command; a
    strict worker that runs the call answers it as not allowed, and starts nothing."""
    ledger = tmp_path / "notes.txt"
    monkeypatch.setenv("NOTES_LEDGER", str(ledger))
    script = [
        assistant_text("ready"),
        assistant_calls(("notes_add_note", {"text": "on the strict worker"})),
        assistant_text("could not take the note"),
    ]
    with ScriptedProvider(script) as provider:
        session = await started_by_a_trusting_worker(temporal_env, task_queue, provider)
        async with running_worker(
            temporal_env, task_queue, Registry(), capabilities=registered(provider)
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            await agents.session(session).send("take a note")
            await agents.session(session).wait(after=3)
            messages = await agents.session(session).messages()
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == 1 and results[0].is_error
    assert "Not allowed on this worker: MCP server 'notes': a spec may not carry" in (
        results[0].content
    )
    assert not ledger.exists()  # the server process never started


async def test_what_the_worker_registered_is_used_by_name(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An endpoint, an MCP server and an OpenAPI service registered on the worker (its
    command, URL and header variables never in the spec); a name it lacks is refused
    with the list of what it has."""
    ledger = tmp_path / "notes.txt"
    monkeypatch.setenv("NOTES_LEDGER", str(ledger))
    monkeypatch.setenv("ORDERS_KEY", "k-9")
    script = [
        assistant_calls(
            ("notes_add_note", {"text": "by name"}),
            ("createOrder", {"body": {"item": "tea", "qty": 2}}),
        ),
        assistant_text("done"),
    ]
    with OrdersService(api_key="k-9") as service, ScriptedProvider(script) as provider:
        capabilities = Capabilities(
            models={"scripted": ProviderEndpoint(base_url=provider.base_url, api_key_env=None)},
            toolsets=[
                McpServerSpec(
                    name="notes",
                    command=sys.executable,
                    args=["-m", "tests.support.mcp_notes_server", "stdio"],
                    env=["NOTES_LEDGER"],
                ),
                OpenApiSpec(
                    name="orders",
                    document=f"{service.url}/openapi.json",
                    headers={"X-Api-Key": "ORDERS_KEY"},
                ),
            ],
        )
        narrowed = {"kind": "openapi", "name": "orders", "operations": ["createOrder"]}
        spec = spec_for(provider, toolsets=[{"kind": "mcp", "name": "notes"}, narrowed])
        spec = spec.model_copy(
            update={"model": spec.model.model_copy(update={"endpoint": "scripted"})}
        )
        assert "command" not in spec.model_dump_json(exclude_none=True, exclude_defaults=True)
        async with running_worker(
            temporal_env, task_queue, Registry(), capabilities=capabilities
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "note it and order tea")
            result = await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
            handle = client.get_workflow_handle(session)
            history = (await handle.fetch_history()).to_json()
            await record_history(handle, "admission")
        # what the worker registered stays on the worker: no command, no document URL
        assert sys.executable not in history and service.url not in history
        assert result.status == "done", result
        note, order = [m for m in messages if isinstance(m, ToolMessage)]
        assert note.content == "noted: by name" and not note.is_error
        assert '"id": "o-1"' in order.content and not order.is_error
        assert service.seen[-1]["key_ok"] is True
        assert ledger.read_text().endswith("by name\n")

        unknown = spec_for(provider, mcp_servers=["weather"])
        text = await refused(temporal_env, task_queue, unknown, capabilities)
    assert "MCP server 'weather' is not registered on this worker (registered: notes)" in text


sent_with: list[dict[str, str]] = []
granted = Registry()


@tool(registry=granted)
def send(token: str, text: str) -> str:
    """Send a text with a token."""
    sent_with.append({"token": token, "text": text})
    return "sent"


@tool(registry=granted)
def echo(text: str) -> str:
    """Say it back."""
    sent_with.append({"echo": text})
    return text


async def test_a_secret_reaches_only_the_tool_and_parameter_it_is_bound_to(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAIL_TOKEN_VALUE", "tok-77")
    sent_with.clear()
    reference = "{{secret:MAIL_TOKEN}}"
    script = [
        assistant_calls(
            ("echo", {"text": reference}),
            ("send", {"token": "plain", "text": reference}),
            ("send", {"token": reference, "text": "hi"}),
        ),
        assistant_text("done"),
    ]
    with ScriptedProvider(script) as provider:
        grant = SecretGrant(tools=["send"], parameters=["token"], variable="MAIL_TOKEN_VALUE")
        capabilities = registered(provider, secrets={"MAIL_TOKEN": grant})
        spec = spec_for(provider, ["echo", "send"], secrets=["MAIL_TOKEN"])
        async with running_worker(
            temporal_env, task_queue, granted, capabilities=capabilities
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "go")
            await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
    echoed, wrong_parameter, right = [m for m in messages if isinstance(m, ToolMessage)]
    assert echoed.is_error and "may not be given to echo(text)" in echoed.content
    assert wrong_parameter.is_error and "may not be given to send(text)" in wrong_parameter.content
    assert not right.is_error and right.content == "sent"
    assert sent_with == [{"token": "tok-77", "text": "hi"}]  # only the granted call ran
    assert "tok-77" not in str([m.model_dump() for m in messages])


async def test_agents_by_name_from_a_strict_workers_module_through_the_cli_and_the_gateway(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``durable-agent worker --agents MODULE`` registers the module's agents (their
    endpoint included) on a worker that trusts no spec; ``run --agent`` and the
    gateway start them by name, and a name the module lacks is refused with the list."""
    script = [
        assistant_calls(("get_time", {"city": "Tokyo"})),
        assistant_text('{"city": "Tokyo", "time": "22:00"}'),
        assistant_calls(("get_time", {"city": "NYC"})),
        assistant_text('{"city": "NYC", "time": "09:00"}'),
    ]
    module = "tests.support.named_agents"
    with ScriptedProvider(script) as provider:
        monkeypatch.setenv("NAMED_AGENTS_MODEL_URL", provider.base_url)
        address = str(temporal_env.client.service_client.config.target_host)
        with worker_process(temporal_env, task_queue, "--agents", module, trust_specs=False):
            run = await asyncio.to_thread(
                subprocess.run,
                [
                    sys.executable,
                    "-m",
                    "durable_agent._cli.main",
                    "run",
                    "--agents",
                    module,
                    "--agent",
                    "clock",
                    "--task-queue",
                    task_queue,
                    "time in Tokyo?",
                ],
                cwd=ROOT,
                env={**os.environ, "TEMPORAL_ADDRESS": address},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert run.returncode == 0, run.stderr
            assert "session ended: done" in run.stdout, run.stdout
            missing = await asyncio.to_thread(
                subprocess.run,
                [
                    sys.executable,
                    "-m",
                    "durable_agent._cli.main",
                    "run",
                    "--agents",
                    module,
                    "--agent",
                    "calendar",
                    "--task-queue",
                    task_queue,
                    "hi",
                ],
                cwd=ROOT,
                env={**os.environ, "TEMPORAL_ADDRESS": address},
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert missing.returncode == 2
            assert "no agent 'calendar' (agents: clock)" in missing.stderr
            with gateway(address, task_queue, None, "--agents", module) as url:
                async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                    started = await http.post(
                        "/api/sessions", json={"agent": "clock", "message": "time in NYC?"}
                    )
                    assert started.status_code == 201, started.text
                    unknown = await http.post("/api/sessions", json={"agent": "calendar"})
                session = started.json()["session_id"]  # a conversation: it goes on
                agents = AgentClient(temporal_env.client, task_queue=task_queue)
                await asyncio.wait_for(agents.session(session).wait(), 60)
                answer = (await agents.session(session).messages())[-1]
    assert unknown.status_code == 404 and unknown.json()["field"] == "agent"
    assert "agents: clock" in unknown.json()["error"]
    assert answer.role == "assistant" and answer.content == '{"city": "NYC", "time": "09:00"}'
    assert [r.body["messages"][-1]["content"] for r in provider.requests[1::2]] == [
        "22:00",
        "09:00",
    ]


def test_a_worker_with_an_unusable_capabilities_file_does_not_start(tmp_path: Path) -> None:
    path = tmp_path / "worker.toml"
    path.write_text('[openapi.billing]\nbase_url = "https://billing.example.com"\n')
    done = subprocess.run(
        [sys.executable, "-m", "durable_agent._cli.main", "worker", "--capabilities", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1"},
    )
    assert done.returncode == 2, done.stderr
    assert "registered OpenAPI service 'billing': give its document" in done.stderr
