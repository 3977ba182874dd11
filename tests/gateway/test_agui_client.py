"""The AG-UI endpoint driven by the official client (npm ``@ag-ui/client``'s
``HttpAgent``, run by node) over real HTTP, against a real worker and dev server: a
run with reasoning, a tool call that waits for a person (the run ends with the
``interrupt`` outcome; the tool has not run), the next run's ``resume`` approving it
(the tool runs, the answer streams), a client back after a disconnect (a
``MESSAGES_SNAPSHOT``, nothing sent twice), message ids of the form the session gives
its own (answered, never refused), and a thread that is another user's."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import UserMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.observability.test_live_events import paced
from tests.support.agent_harness import record_history
from tests.support.agui_client import CLIENT, need_agui_client, run_agent
from tests.support.docs_page import page_block
from tests.support.gateway_harness import read_sse, served

COMPATIBLE_ENDPOINTS = (
    Path(__file__).parent.parent.parent / "docs" / "how-to" / "compatible-endpoints.md"
)
wiped: list[str] = []
registry = Registry()


@tool(registry=registry, approval="always")
def wipe_cache(name: str) -> str:
    """Clear a cache (a person approves)."""
    wiped.append(name)
    return f"cache {name} cleared"


picked: list[str] = []


@tool(registry=registry, external_output=True)
def pick_colour(question: str) -> str:
    """Ask the person at the page to pick a colour (the page answers)."""
    picked.append(question)
    return "never: the page gives the output"


def kinds(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"]]


async def test_the_official_client_runs_reasons_calls_a_tool_and_resumes_an_approval(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    wiped.clear()
    calls = assistant_calls(("wipe_cache", {"name": "tiles"}))
    thinking = calls.model_copy(update={"reasoning": "the tiles cache is stale"})
    script = [thinking, assistant_text("tiles cleared", reasoning="it worked")]
    with ScriptedProvider(script) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache"], registry, tmp_path
        ) as (client, base):
            agents = AgentClient(client, task_queue=task_queue)
            url, thread = f"{base}/api/agui", f"thread-{task_queue}"
            asked = [{"id": "u1", "role": "user", "content": "clear the tiles cache"}]
            first = await run_agent(url, thread, asked, runId="run-1")
            session = f"conversation-{thread}"
            pending = (await agents.session(session).status()).pending_approvals
            assert wiped == [] and len(pending) == 1  # it waits; the tool has not run
            [interrupt] = first["events"][-1]["outcome"]["interrupts"]
            # back before deciding: the snapshot, and the same interrupt again
            waiting = await run_agent(url, thread, asked)
            resume = [
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"approved": True},
                }
            ]
            second = await run_agent(url, thread, first["messages"], resume=resume)
            again = await run_agent(url, thread, second["messages"])  # back, nothing new
            array = await agents.session(session).messages()
            handle = client.get_workflow_handle(session)
            await handle.signal("end_session")
            await handle.result()
            await record_history(handle, "agui_interrupt_resumed")
    assert first["error"] is None and second["error"] is None and again["error"] is None
    # the first run: reasoning, the call, then the interrupt naming the call
    got = kinds(first)
    assert got[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"] and got[-1] == "RUN_FINISHED"
    order = [k for k in got if k.startswith(("REASONING", "TOOL_CALL", "STEP"))]
    assert order == [
        "STEP_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "STEP_FINISHED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    ]
    start = next(e for e in first["events"] if e["type"] == "TOOL_CALL_START")
    assert start["toolCallName"] == "wipe_cache"
    assert interrupt["id"] == pending[0].approval_id and interrupt["reason"] == "tool_approval"
    assert interrupt["toolCallId"] == start["toolCallId"]
    assert "tiles" in interrupt["message"]
    state = first["events"][-2]
    assert state["type"] == "STATE_SNAPSHOT"
    assert state["snapshot"]["pending_approvals"] == [interrupt["id"]]
    assert state["snapshot"]["phase"] == "awaiting_approval"
    assert kinds(waiting) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert waiting["events"][-1]["outcome"]["interrupts"] == [interrupt]
    # the second run: the approval is the caller's, the tool ran, the answer streamed
    assert wiped == ["tiles"]
    got = kinds(second)
    assert got[-1] == "RUN_FINISHED" and "outcome" not in second["events"][-1]
    result = next(e for e in second["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == start["toolCallId"]
    assert result["content"] == "cache tiles cleared"
    text = "".join(e["delta"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "tiles cleared"
    assert got.index("TOOL_CALL_RESULT") < got.index("TEXT_MESSAGE_START")
    assert second["messages"][-1]["role"] == "assistant"
    assert second["messages"][-1]["content"] == "tiles cleared"
    # back with what it had: a snapshot of the array, no message sent, no model call
    assert kinds(again) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    snapshot = again["events"][1]["messages"]
    assert [m["role"] for m in snapshot] == ["user", "assistant", "tool", "assistant"]
    assert snapshot[0]["id"] == "u1" and snapshot[-1]["content"] == "tiles cleared"
    assert len(array) == 4 and len(provider.requests) == 2
    assert array[0].id == "u1"


async def test_a_client_back_after_a_disconnect_sees_the_reply_and_sends_nothing_twice(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The first client goes away mid-answer; the next sends the same messages (the
    same user message id): the session is not asked twice, and the run it gets starts
    from a snapshot of the array and ends with the answer."""
    released = threading.Event()
    answer = paced(assistant_text("a long answer"), 0.01)
    held = dataclasses.replace(answer, hold=released, hold_after=len(answer.chunks) // 2)
    with ScriptedProvider([held]) as provider:
        async with served(temporal_env, task_queue, provider, [], registry, tmp_path) as (
            client,
            base,
        ):
            agents = AgentClient(client, task_queue=task_queue)
            thread = f"thread-{task_queue}"
            asked = [{"id": "u-once", "role": "user", "content": "tell me a story"}]
            body = {
                "threadId": thread,
                "runId": "r1",
                "messages": asked,
                "state": {},
                "tools": [],
                "context": [],
                "forwardedProps": {},
            }
            async with (
                httpx.AsyncClient(base_url=base, timeout=60) as http,
                http.stream("POST", "/api/agui", json=body) as response,
            ):
                async for event in read_sse(response):  # gone mid-answer
                    if event.data["type"] == "TEXT_MESSAGE_CONTENT":
                        break
            session = f"conversation-{thread}"

            def on_event(event: dict[str, Any]) -> None:
                if event["type"] == "MESSAGES_SNAPSHOT":  # it follows the reply now
                    released.set()

            rejoined = run_agent(f"{base}/api/agui", thread, asked, on_event)
            back = await rejoined
            array = await agents.session(session).messages()
    assert back["error"] is None
    assert [m["role"] for m in back["messages"]] == ["user", "assistant"]
    assert back["messages"][-1]["content"] == "a long answer"
    assert "MESSAGES_SNAPSHOT" in kinds(back) and kinds(back)[-1] == "RUN_FINISHED"
    users = [m for m in array if isinstance(m, UserMessage)]
    assert [u.id for u in users] == ["u-once"] and len(provider.requests) == 1


async def test_a_client_whose_ids_have_the_sessions_own_form_is_served(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The client names its first message ``m1`` (the id the session gives the reply
    to it) and its second ``m0`` (the id the session gave the first): both are answered,
    and when the client comes back holding ``m0`` unanswered, the gateway knows it has
    that message (the client's ``m0``, not the session's) and sends nothing twice."""
    with ScriptedProvider([assistant_text("one"), assistant_text("two")]) as provider:
        async with served(temporal_env, task_queue, provider, [], registry, tmp_path) as (
            client,
            base,
        ):
            agents = AgentClient(client, task_queue=task_queue)
            url, thread = f"{base}/api/agui", f"thread-{task_queue}"
            first = await run_agent(url, thread, [{"id": "m1", "role": "user", "content": "first"}])
            asked = [*first["messages"], {"id": "m0", "role": "user", "content": "second"}]
            second = await run_agent(url, thread, asked)
            back = await run_agent(url, thread, asked)  # the answer never reached it
            session = f"conversation-{thread}"
            array = await agents.session(session).messages()
            handle = client.get_workflow_handle(session)
            await handle.signal("end_session")
            await handle.result()
    assert first["error"] is None and second["error"] is None and back["error"] is None
    said = [
        "".join(e["delta"] for e in run["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
        for run in (first, second)
    ]
    assert said == ["one", "two"]
    assert len(provider.requests) == 2, "each message answered once"
    assert [m["content"] for m in provider.requests[1].body["messages"]] == [
        "first",
        "one",
        "second",
    ]
    assert [(m.id, m.given_id, m.content) for m in array] == [
        ("m0", "m1", "first"),
        ("m1", None, "one"),
        ("m2", "m0", "second"),
        ("m3", None, "two"),
    ]
    # back: a snapshot naming each message once, the client's by its own ids
    assert kinds(back) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    snapshot = back["events"][1]["messages"]
    assert [(m["id"], m["content"]) for m in snapshot] == [
        ("m1", "first"),
        (f"{thread}-m1", "one"),
        ("m0", "second"),
        (f"{thread}-m3", "two"),
    ]


async def test_another_users_thread_is_not_theirs_to_resume(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wiped.clear()
    alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
    monkeypatch.setenv("DURABLE_AGENT_GATEWAY_TOKENS", f"alice={alice},bob={bob}")
    with ScriptedProvider([assistant_calls(("wipe_cache", {"name": "maps"}))]) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache"], registry, tmp_path
        ) as (client, base):
            agents = AgentClient(client, task_queue=task_queue)
            url, thread = f"{base}/api/agui", f"thread-{task_queue}"
            asked = [{"id": "u1", "role": "user", "content": "clear maps"}]
            as_alice = {"Authorization": f"Bearer {alice}"}
            first = await run_agent(url, thread, asked, headers=as_alice)
            assert first["events"], first  # (once in CI: no event at all; the client's error)
            [interrupt] = first["events"][-1]["outcome"]["interrupts"]
            resume = [
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"approved": True},
                }
            ]
            as_bob = {"Authorization": f"Bearer {bob}"}
            stolen = await run_agent(url, thread, first["messages"], headers=as_bob, resume=resume)
            session = f"conversation-token~alice~{thread}"
            still = await agents.session(session).status()
    assert stolen["error"] is not None and "404" in stolen["error"]
    assert [p.approval_id for p in still.pending_approvals] == [interrupt["id"]]
    assert wiped == [], "bob's answer decided nothing"


async def test_the_manuals_example_runs_with_the_official_client(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """docs/how-to/compatible-endpoints.md's AG-UI example, as it stands, run by node: it asks, sees
    the interrupt, approves it, and the answer streams."""
    wiped.clear()
    script = [assistant_calls(("wipe_cache", {"name": "tiles"})), assistant_text("tiles cleared")]
    example = CLIENT / f".example-{task_queue}.mjs"  # beside the client, which it imports
    example.write_text(page_block("## AG-UI", "js", COMPATIBLE_ENDPOINTS))
    with ScriptedProvider(script) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache"], registry, tmp_path
        ) as (_, base):
            need_agui_client()
            process = await asyncio.create_subprocess_exec(
                "node",
                str(example),
                cwd=CLIENT,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, "GATEWAY_URL": f"{base}/api/agui"},
            )
            out, err = await asyncio.wait_for(process.communicate(), 120)
    example.unlink()
    assert process.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert lines[-2].startswith("approving: ") and "tiles" in lines[-2]
    assert lines[-1] == "tiles cleared" and wiped == ["tiles"]


async def test_a_front_end_tool_is_answered_by_the_page_with_a_resume(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """A tool whose output comes from outside, as the official client sees it: the run
    ends with an interrupt of reason ``tool_output`` asking for ``output``; the next
    run's ``resume`` gives it, and it is the call's result (the function never ran)."""
    picked.clear()
    script = [assistant_calls(("pick_colour", {"question": "which?"})), assistant_text("teal")]
    with ScriptedProvider(script) as provider:
        async with served(
            temporal_env, task_queue, provider, ["pick_colour"], registry, tmp_path
        ) as (client, base):
            url, thread = f"{base}/api/agui", f"thread-{task_queue}"
            asked = [{"id": "u1", "role": "user", "content": "pick a colour"}]
            first = await run_agent(url, thread, asked)
            [interrupt] = first["events"][-1]["outcome"]["interrupts"]
            resume = [
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"output": "teal"},
                }
            ]
            second = await run_agent(url, thread, first["messages"], resume=resume)
            handle = client.get_workflow_handle(f"conversation-{thread}")
            await handle.signal("end_session")
            await handle.result()
    assert first["error"] is None and second["error"] is None
    assert interrupt["reason"] == "tool_output"
    assert interrupt["responseSchema"]["required"] == ["output"]
    result = next(e for e in second["events"] if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "teal"
    text = "".join(e["delta"] for e in second["events"] if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "teal" and picked == []
