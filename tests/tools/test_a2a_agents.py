"""Remote A2A agents as tools (the ``a2a_agent`` kind), against our own A2A door served
by a second gateway (a real A2A agent over real HTTP, with its own worker): a call's
answer is the tool's result and a session keeps one conversation with the remote; a
worker killed mid-call resumes by the remote's task id and the remote gets the message
once; a remote that redirects, or whose card names another host, is refused and the
other host gets nothing; a spec naming an unregistered remote or carrying a URL is
refused before any request."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client.results import SessionFailedError, SpecError
from durable_agent._tools.a2a_agents import context_id
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import Message, ToolMessage, UserMessage
from durable_agent.capabilities import RemoteAgent, RemoteAgents
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.a2a_sdk_agent import sdk_agent
from tests.support.agent_harness import running_worker, spec_for, start_worker_process
from tests.support.gateway_harness import served
from tests.support.recording_server import RecordingServer

remote_registry = Registry()
released = threading.Event()
reports: list[str] = []


@tool(registry=remote_registry, approval="always")
def refund(invoice: str) -> str:
    """Refund an invoice (a person approves)."""
    return f"refunded {invoice}"


@tool(registry=remote_registry)
def slow_report(quarter: str) -> str:
    """The quarter's report (it takes a while)."""
    reports.append(quarter)
    released.wait(30)
    return f"report {quarter}: revenue up"


def caller_spec(provider: ScriptedProvider, name: str = "billing", **session: object) -> object:
    toolsets = [{"kind": "a2a_agent", "name": name}]
    return spec_for(provider, toolsets=toolsets, session={"end_after_reply": True, **session})


def tool_results(array: list[Message]) -> list[ToolMessage]:
    return [m for m in array if isinstance(m, ToolMessage)]


async def test_the_remote_answers_and_a_session_keeps_one_conversation_with_it(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    remote_script = [assistant_text("invoice 7 is paid"), assistant_text("it was paid on May 2")]
    asks = assistant_calls(("billing_ask", {"task": "is invoice 7 paid?"}))
    again = assistant_calls(("billing_ask", {"task": "when?"}))
    script = [asks, again, assistant_text("paid, on May 2")]
    with ScriptedProvider(remote_script) as remote, ScriptedProvider(script) as provider:
        async with served(
            temporal_env, f"{task_queue}-remote", remote, [], remote_registry, tmp_path
        ) as (_, base):
            kind = RemoteAgents({"billing": RemoteAgent(url=base)})
            async with running_worker(temporal_env, task_queue, Registry([kind])) as client:
                agents = AgentClient(client, task_queue=task_queue)
                session = await agents.start(caller_spec(provider), "ask billing")
                result = await agents.session(session).result()
                array = await agents.session(session).messages()
                conversation = f"conversation-{context_id(session, 'billing')}"
                far = await agents.session(conversation).messages()
    assert result.status == "done", result.error
    first, second = tool_results(array)
    assert first.content == "invoice 7 is paid" and not first.is_error
    assert second.content == "it was paid on May 2"
    # one conversation on the remote: both tasks, each once
    said = [m.content for m in far if isinstance(m, UserMessage)]
    assert said == ["is invoice 7 paid?", "when?"]
    assert len(remote.requests) == 2


async def test_a_worker_killed_mid_call_resumes_by_task_id_and_the_remote_gets_one_message(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    released.clear()
    reports.clear()
    remote_script = [
        assistant_calls(("slow_report", {"quarter": "q3"})),
        assistant_text("q3: revenue up"),
    ]
    script = [assistant_calls(("billing_ask", {"task": "the q3 report"})), assistant_text("ok")]
    with ScriptedProvider(remote_script) as remote, ScriptedProvider(script) as provider:
        async with served(
            temporal_env, f"{task_queue}-remote", remote, ["slow_report"], remote_registry, tmp_path
        ) as (_, base):
            remotes = {"A2A_REMOTE_URL": base}
            args = ("--tools", "tests.support.a2a_remotes")
            worker = start_worker_process(temporal_env, task_queue, *args, **remotes)
            try:
                agents = AgentClient(temporal_env.client, task_queue=task_queue)
                spec = caller_spec(provider, heartbeat_timeout_seconds=2)
                session = await agents.start(spec, "get the q3 report")
                conversation = agents.session(f"conversation-{context_id(session, 'billing')}")
                for _ in range(400):  # the remote works on it: its tool runs
                    if reports:
                        break
                    await asyncio.sleep(0.05)
                await asyncio.sleep(1.0)  # the task id is noted with the call's heartbeat
                worker.send_signal(signal.SIGKILL)
                worker.wait()
                worker = start_worker_process(temporal_env, task_queue, *args, **remotes)
                released.set()
                result = await asyncio.wait_for(agents.session(session).result(), 90)
                array = await agents.session(session).messages()
                far = await conversation.messages()
            finally:
                worker.kill()
                worker.wait()
    assert reports == ["q3"]
    assert result.status == "done", result.error
    [answer] = tool_results(array)
    assert answer.content == "q3: revenue up" and not answer.is_error
    assert [m.content for m in far if isinstance(m, UserMessage)] == ["the q3 report"]
    assert len(remote.requests) == 2, "the remote's model was asked for this task only"


async def test_an_agent_served_by_the_sdks_own_server_answers_one_message(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_calls(("echo_ask", {"task": "ping"})), assistant_text("it said ping")]
    with ScriptedProvider(script) as provider:
        async with sdk_agent() as (base, echo):
            kind = RemoteAgents({"echo": RemoteAgent(url=base)})
            async with running_worker(temporal_env, task_queue, Registry([kind])) as client:
                agents = AgentClient(client, task_queue=task_queue)
                session = await agents.start(caller_spec(provider, "echo"), "ping it")
                result = await agents.session(session).result()
                array = await agents.session(session).messages()
    assert result.status == "done", result.error
    [answer] = tool_results(array)
    assert answer.content == "echo: ping" and not answer.is_error
    assert len(echo.received) == 1


async def test_a_remote_that_asks_for_input_gives_the_model_its_question(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    remote_script = [assistant_calls(("refund", {"invoice": "7"}))]
    script = [assistant_calls(("billing_ask", {"task": "refund invoice 7"})), assistant_text("ok")]
    with ScriptedProvider(remote_script) as remote, ScriptedProvider(script) as provider:
        async with served(
            temporal_env, f"{task_queue}-remote", remote, ["refund"], remote_registry, tmp_path
        ) as (_, base):
            kind = RemoteAgents({"billing": RemoteAgent(url=base)})
            async with running_worker(temporal_env, task_queue, Registry([kind])) as client:
                agents = AgentClient(client, task_queue=task_queue)
                session = await agents.start(caller_spec(provider), "refund it")
                await agents.session(session).result()
                array = await agents.session(session).messages()
                conversation = f"conversation-{context_id(session, 'billing')}"
                far = await agents.session(conversation).status()
    [asked] = tool_results(array)
    assert not asked.is_error
    assert str(asked.content).startswith("The agent 'billing' asks (answer it with your next call)")
    assert "refund" in str(asked.content) and '"approved": true' in str(asked.content)
    assert far.phase == "awaiting_approval", "the remote's call still waits for its person"


async def test_a_remote_that_redirects_is_refused_and_the_other_host_gets_nothing(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with RecordingServer() as elsewhere:
        card = "/.well-known/agent-card.json"
        moved = {card: (302, {"Location": f"{elsewhere.url}{card}"}, {})}
        with RecordingServer(moved) as redirecting:
            script = [assistant_calls(("billing_ask", {"task": "hi"})), assistant_text("x")]
            with ScriptedProvider(script) as provider:
                kind = RemoteAgents({"billing": RemoteAgent(url=redirecting.url)})
                async with running_worker(temporal_env, task_queue, Registry([kind])) as client:
                    agents = AgentClient(client, task_queue=task_queue)
                    session = await agents.start(caller_spec(provider), "ask")
                    await agents.session(session).result()
                    array = await agents.session(session).messages()
    [refusal] = tool_results(array)
    assert refusal.is_error and "redirect" in str(refusal.content)
    assert [s.path for s in redirecting.seen] == [card]
    assert elsewhere.seen == []


async def test_a_card_naming_another_host_is_refused_and_that_host_gets_nothing(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with RecordingServer() as elsewhere:
        card = {
            "name": "billing",
            "description": "bills",
            "version": "1",
            "supportedInterfaces": [
                {"url": elsewhere.url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ],
            "capabilities": {"streaming": True},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }
        routes = {"/.well-known/agent-card.json": (200, {}, card)}
        with RecordingServer(routes) as remote:
            script = [assistant_calls(("billing_ask", {"task": "hi"})), assistant_text("x")]
            with ScriptedProvider(script) as provider:
                kind = RemoteAgents({"billing": RemoteAgent(url=remote.url)})
                async with running_worker(temporal_env, task_queue, Registry([kind])) as client:
                    agents = AgentClient(client, task_queue=task_queue)
                    session = await agents.start(caller_spec(provider), "ask")
                    await agents.session(session).result()
                    array = await agents.session(session).messages()
    [refusal] = tool_results(array)
    assert refusal.is_error and "another host" in str(refusal.content)
    assert elsewhere.seen == []


async def test_a_spec_naming_an_unregistered_remote_or_a_url_is_refused_before_any_request(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with RecordingServer() as remote, ScriptedProvider([assistant_text("x")]) as provider:
        kind = RemoteAgents({"billing": RemoteAgent(url=remote.url)})
        async with running_worker(temporal_env, task_queue, Registry([kind])) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(caller_spec(provider, "payroll"), "ask")
            with pytest.raises(SessionFailedError) as failed:
                await agents.session(session).result()
            with pytest.raises((SpecError, ValueError)):
                spec = caller_spec(provider)
                carried = spec.model_dump()  # type: ignore[attr-defined]
                carried["toolsets"] = [{"kind": "a2a_agent", "name": "billing", "url": remote.url}]
                await agents.start(carried, "ask")
    assert "'payroll' is not registered" in str(failed.value)
    assert remote.seen == [] and provider.requests == []


async def test_the_a2a_pair_example_runs_with_its_built_in_models() -> None:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "examples.a2a_pair"],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "Billing says: Invoice 7 was paid on May 2."
