"""The OpenAI-compatible compatible endpoint driven by the official ``openai`` SDK over real HTTP,
against a real worker and dev server: a streamed chat, its next turn found from the
history, a request sent again after a disconnect (answered, nothing asked twice), a
client's own history starting a session, a call waiting for a person (the
``durable_agent`` field), and the refusals, in OpenAI's error shape."""

from __future__ import annotations

import asyncio
import functools
import io
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._wire.messages import AssistantMessage, UserMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.gateway.test_agui_client import COMPATIBLE_ENDPOINTS, registry, wiped
from tests.project.test_cli import address_of
from tests.support.agent_harness import (
    KILL_HEARTBEAT_SECONDS,
    spec_for,
    start_worker_process,
    wait_for,
)
from tests.support.docs_page import page_block
from tests.support.gateway_harness import gateway, served


def echo(request: RecordedRequest) -> AssistantMessage:
    """Says what it was told last; asked to clear a cache, it calls ``wipe_cache``."""
    messages = request.body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return assistant_text(f"done: {last['content']}")
    if "clear" in last["content"]:
        return assistant_calls(("wipe_cache", {"name": "tiles"}))
    return assistant_text(f"you said {last['content']} ({len(messages)} messages)")


def said(messages: list[Any]) -> list[tuple[str, str]]:
    return [
        (m.role, m.content)
        for m in messages
        if isinstance(m, UserMessage | AssistantMessage)
        and m.content
        and not getattr(m, "tool_calls", None)
    ]


async def test_the_openai_sdk_chats_with_a_durable_session(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    wiped.clear()
    with ScriptedProvider(responder=echo) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache"], registry, tmp_path
        ) as (client, base):
            agents = AgentClient(client, task_queue=task_queue)
            sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="not-needed")
            first = [{"role": "user", "content": f"hello {task_queue}"}]
            # streamed: the text arrives in pieces, then the stop, then the usage
            raw = await sdk.chat.completions.with_raw_response.create(
                model="durable-agent",
                messages=first,
                stream=True,  # type: ignore[arg-type]
                stream_options={"include_usage": True},
            )
            session = raw.headers["durable-session-id"]
            chunks = [c async for c in raw.parse()]
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            # the next turn: the history finds the session
            history = [
                *first,
                {"role": "assistant", "content": text},
                {"role": "user", "content": "and again"},
            ]
            second = await sdk.chat.completions.create(model="durable-agent", messages=history)  # type: ignore[arg-type]
            asked = len(provider.requests)
            # sent again (a client back after a disconnect): the same answer, not re-asked
            again = await sdk.chat.completions.create(model="durable-agent", messages=history)  # type: ignore[arg-type]
            asked_again = len(provider.requests)
            array = await agents.session(session).messages()
            first_event = (await client.get_workflow_handle(session).fetch_history()).events[0]
            started_input = first_event.workflow_execution_started_event_attributes.input.payloads[
                0
            ].data.decode()
            # a call waiting for a person: the reply says where to decide it
            answer = second.choices[0].message.content
            clear = [
                *history,
                {"role": "assistant", "content": answer},
                {"role": "user", "content": "clear the tiles"},
            ]
            waiting = await sdk.chat.completions.create(model="durable-agent", messages=clear)  # type: ignore[arg-type]
            extension = waiting.model_extra["durable_agent"]  # type: ignore[index]
            tiles_before = list(wiped)
            [pending] = extension["pending_approvals"]
            async with httpx.AsyncClient(base_url=base) as http:
                decided = await http.post(pending["approve"], json={"by": "alice"})
            done = await sdk.chat.completions.create(model="durable-agent", messages=clear)  # type: ignore[arg-type]
            # a client's own history: a new session starts with it
            own = [
                {"role": "user", "content": f"x {task_queue}"},
                {"role": "assistant", "content": "y"},
                {"role": "user", "content": "z"},
            ]
            started = await sdk.chat.completions.with_raw_response.create(
                model="durable-agent", messages=own
            )  # type: ignore[arg-type]
            other = started.headers["durable-session-id"]
            other_array = await agents.session(other).messages()
            with pytest.raises(openai.BadRequestError) as refused:
                await sdk.chat.completions.create(
                    model="durable-agent",
                    messages=first,  # type: ignore[arg-type]
                    tools=[{"type": "function", "function": {"name": "rm", "parameters": {}}}],
                )
            with pytest.raises(openai.BadRequestError) as not_user:
                await sdk.chat.completions.create(
                    model="durable-agent",
                    messages=[{"role": "assistant", "content": "hi"}],  # type: ignore[list-item]
                )
    roles = [c.choices[0].delta.role for c in chunks if c.choices]
    assert roles[0] == "assistant" and chunks[-1].usage is not None and not chunks[-1].choices
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert text == f"you said hello {task_queue} (1 messages)"
    assert second.choices[0].message.content == "you said and again (3 messages)"
    assert again.choices[0].message.content == second.choices[0].message.content
    assert asked_again == asked == 2  # the request sent again asked the model nothing
    assert said(array) == [
        ("user", first[0]["content"]),
        ("assistant", text),
        ("user", "and again"),
        ("assistant", second.choices[0].message.content),
    ]
    assert pending["tool"] == "wipe_cache" and tiles_before == []  # it waited
    # a stock chat window shows the calls that wait and how to decide it
    shown = waiting.choices[0].message.content or ""
    assert shown.startswith("Waiting for a person to approve 1 call(s)"), shown
    assert pending["approve"] in shown and "wipe_cache" in shown and '"tiles"' in shown
    # the chat's session ends when nobody writes for an hour (a client back later resumes)
    assert '"idle_timeout_seconds":3600.0' in started_input, started_input[:300]
    assert decided.status_code == 202 and wiped == ["tiles"]
    assert done.choices[0].message.content == "done: cache tiles cleared"
    assert other != session and said(other_array) == [
        ("user", own[0]["content"]),
        ("assistant", "y"),
        ("user", "z"),
        ("assistant", "you said z (3 messages)"),
    ]
    assert refused.value.body["param"] == "tools"  # type: ignore[index]
    assert not_user.value.body["param"] == "messages"  # type: ignore[index]


async def test_a_responses_conversation_goes_on_after_its_worker_is_killed(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Two turns by ``previous_response_id``; the second's model call is under way on a
    worker that is killed (SIGKILL): another worker takes the session over and the
    request, still waiting, gets the answer, with nothing lost or repeated."""
    lock, seen, gone = threading.Lock(), [0], threading.Event()

    def model(request: RecordedRequest) -> AssistantMessage:
        with lock:
            seen[0] += 1
            number = seen[0]
        if number == 2:  # the call on the worker about to be killed never returns in time
            gone.wait(60)
        return echo(request)

    with ScriptedProvider(responder=model) as provider:
        spec = tmp_path / "spec.json"
        rules = {"heartbeat_timeout_seconds": KILL_HEARTBEAT_SECONDS}
        spec.write_text(spec_for(provider, [], session=rules).model_dump_json())
        first_worker = start_worker_process(temporal_env, task_queue)
        workers = [first_worker]
        try:
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="not-needed")
                first = await sdk.responses.create(model="durable-agent", input="remember 7")
                second_call = asyncio.ensure_future(
                    sdk.responses.create(
                        model="durable-agent",
                        input="what was it?",
                        previous_response_id=first.id,
                    )
                )

                async def asked_twice() -> bool:
                    return seen[0] >= 2

                await wait_for(asked_twice, timeout=60)
                first_worker.kill()
                first_worker.wait()
                workers.append(start_worker_process(temporal_env, task_queue))
                second = await second_call
                again = await sdk.responses.retrieve(second.id)
                session = first.model_extra["durable_agent"]["session_id"]  # type: ignore[index]
                agents = AgentClient(temporal_env.client, task_queue=task_queue)
                array = await agents.session(session).messages()
        finally:
            gone.set()
            for worker in workers:
                worker.kill()
                worker.wait()
    assert first.output_text == "you said remember 7 (1 messages)"
    assert second.output_text == "you said what was it? (3 messages)"
    assert second.previous_response_id == first.id and again.output_text == second.output_text
    assert said(array) == [
        ("user", "remember 7"),
        ("assistant", first.output_text),
        ("user", "what was it?"),
        ("assistant", second.output_text),
    ]
    assert seen[0] == 3 and len(provider.requests) == 3  # the lost call, and its retry


async def test_responses_by_conversation_id_with_a_call_a_person_approves(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    wiped.clear()
    with ScriptedProvider(responder=echo) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache"], registry, tmp_path
        ) as (_, base):
            sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="not-needed")
            conversation = f"support-{task_queue}"
            hello = await sdk.responses.create(
                model="durable-agent", input="hello", conversation=conversation
            )
            asking = await sdk.responses.create(
                model="durable-agent",
                conversation=conversation,
                input=[{"role": "user", "content": "clear the tiles"}],
            )
            [request] = [item for item in asking.output if item.type == "mcp_approval_request"]
            waited = list(wiped)
            answer = await sdk.responses.create(
                model="durable-agent",
                previous_response_id=asking.id,
                input=[
                    {
                        "type": "mcp_approval_response",
                        "approval_request_id": request.id,
                        "approve": True,
                    }
                ],
            )
            # streamed: OpenAI's event sequence, read raw and by the SDK's helper
            events = [
                e
                async for e in await sdk.responses.create(
                    model="durable-agent",
                    input="stream this",
                    conversation=conversation,
                    stream=True,
                )
            ]
            async with sdk.responses.stream(
                model="durable-agent", input="and this", conversation=conversation
            ) as helped:
                final = await helped.get_final_response()
            with pytest.raises(openai.BadRequestError) as refused:
                await sdk.responses.create(
                    model="durable-agent", input="x", instructions="be someone else"
                )
            with pytest.raises(openai.NotFoundError):
                await sdk.responses.create(
                    model="durable-agent", input="x", previous_response_id="resp_bm9uZQ.1"
                )
    assert hello.output_text == "you said hello (1 messages)"
    assert hello.model_extra["durable_agent"]["session_id"] == f"conversation-{conversation}"  # type: ignore[index]
    assert request.name == "wipe_cache" and waited == [] and wiped == ["tiles"]  # type: ignore[attr-defined]
    assert answer.output_text == "done: cache tiles cleared"
    assert refused.value.body["param"] == "instructions"  # type: ignore[index]
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "you said stream this (7 messages)" == events[-1].response.output_text
    assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))
    assert final.output_text == "you said and this (9 messages)"
    assert len(provider.requests) == 5


async def test_the_manuals_example_runs_against_the_gateway(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """docs/how-to/compatible-endpoints.md's OpenAI example, as it stands (the gateway's
    address aside): a streamed chat, then two Responses turns in one conversation."""
    block = page_block("## OpenAI-compatible endpoints", page=COMPATIBLE_ENDPOINTS)
    with ScriptedProvider(responder=echo) as provider:
        async with served(temporal_env, task_queue, provider, [], registry, tmp_path) as (_, base):
            code = block.replace("http://127.0.0.1:8700", base)
            code = code.replace('"support-42"', f'"support-{task_queue}"')
            printed = io.StringIO()

            def run() -> None:  # (its print writes here: the worker logs to stdout)
                said = functools.partial(print, file=printed)
                exec(compile(code, str(COMPATIBLE_ENDPOINTS), "exec"), {"print": said})

            await asyncio.to_thread(run)
    lines = printed.getvalue().splitlines()
    assert lines == [
        "you said What is on my calendar today? (1 messages)",
        "you said What was it? (3 messages)",
    ]


async def test_with_tokens_each_users_conversations_are_their_own(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API key is a gateway token: without one, 401; bob's chat that begins as
    alice's does is another session; alice's response is not bob's to go on from."""
    alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
    monkeypatch.setenv("DURABLE_AGENT_GATEWAY_TOKENS", f"alice={alice},bob={bob}")
    with ScriptedProvider(responder=echo) as provider:
        async with served(temporal_env, task_queue, provider, [], registry, tmp_path) as (
            client,
            base,
        ):
            as_alice = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=alice)
            as_bob = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key=bob)
            nobody = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="not-a-token")
            asked = [{"role": "user", "content": f"hi {task_queue}"}]
            hers = await as_alice.chat.completions.with_raw_response.create(
                model="durable-agent", messages=asked
            )  # type: ignore[arg-type]
            his = await as_bob.chat.completions.with_raw_response.create(
                model="durable-agent", messages=asked
            )  # type: ignore[arg-type]
            first = await as_alice.responses.create(model="durable-agent", input="mine")
            with pytest.raises(openai.NotFoundError):
                await as_bob.responses.create(
                    model="durable-agent", input="steal", previous_response_id=first.id
                )
            with pytest.raises(openai.AuthenticationError):
                await nobody.chat.completions.create(model="durable-agent", messages=asked)  # type: ignore[arg-type]
            agents = AgentClient(client, task_queue=task_queue)
            session = first.model_extra["durable_agent"]["session_id"]  # type: ignore[index]
            owners = [
                await agents.session(s).owner()
                for s in (
                    hers.headers["durable-session-id"],
                    his.headers["durable-session-id"],
                    session,
                )
            ]
            array = await agents.session(session).messages()
    assert hers.headers["durable-session-id"] != his.headers["durable-session-id"]
    assert owners == ["token:alice", "token:bob", "token:alice"]
    assert [m.content for m in array] == ["mine", "you said mine (1 messages)"]
    assert len(provider.requests) == 3  # bob's "steal" reached no model


async def test_a_session_without_deltas_still_streams_its_answer_through_each_door(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Deltas off (``live_deltas: false``): the log has no ``text_delta``, and the entry points
    that speak in deltas take the answer from the reply's own event, as one delta. The
    OpenAI chat stream, the Responses stream and AG-UI each show the whole answer;
    the session's own event stream stays as the log has it (no delta made up)."""
    with ScriptedProvider(responder=echo) as provider:
        async with served(
            temporal_env, task_queue, provider, [], registry, tmp_path, live_deltas=False
        ) as (client, base):
            sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="not-needed")
            first = [{"role": "user", "content": f"quiet {task_queue}"}]
            raw = await sdk.chat.completions.with_raw_response.create(
                model="durable-agent",
                messages=first,
                stream=True,  # type: ignore[arg-type]
            )
            session = raw.headers["durable-session-id"]
            chunks = [c async for c in raw.parse()]
            streamed = [
                e
                async for e in await sdk.responses.create(
                    model="durable-agent",
                    input="and now",
                    stream=True,
                    conversation=f"quiet-{task_queue}",
                )
            ]
            agents = AgentClient(client, task_queue=task_queue)
            await agents.session(session).end()  # its event streams end with it
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                response = await http.get(
                    f"/api/sessions/{session}/events", params={"format": "agui", "after": -1}
                )
                agui = [
                    json.loads(line[5:])
                    for line in response.text.splitlines()
                    if line.startswith("data:")
                ]
            log = [e async for e in agents.session(session).follow()]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == f"you said quiet {task_queue} (1 messages)"
    deltas = "".join(e.delta for e in streamed if e.type == "response.output_text.delta")
    assert deltas == "you said and now (1 messages)" == streamed[-1].response.output_text
    shown = "".join(e["delta"] for e in agui if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert shown == text, agui
    assert "text_delta" not in [e.type for e in log] and log[-1].type == "ended"
