"""The AI SDK door driven by the Vercel AI SDK itself (npm ``ai``: its
``DefaultChatTransport`` sends, ``readUIMessageStream`` reads) over real HTTP, against a
real worker and dev server: every part type of the UI message stream seen in order
(reasoning, tool input, an approval request, tool output and a tool's error, text, an
error, finish), a denied call that never ran, the transport's ``resumeStream`` joining
a reply under way, and the hostile requests: another user's chat, an approval naming a
call that is not waiting, parts the door cannot take, an oversized body."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.approvals import ApproverKey, ApproverKeys
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import error_reply
from tests.observability.test_live_events import paced
from tests.project.test_cli import address_of
from tests.support.agent_harness import running_worker, spec_for
from tests.support.ai_sdk_client import answered, chat_request, user_message, validated
from tests.support.gateway_harness import gateway, read_sse, served

registry = Registry()
wiped: list[str] = []


@tool(registry=registry, approval="always")
def wipe_cache(name: str) -> str:
    """Clear a cache (a person approves)."""
    wiped.append(name)
    return f"cache {name} cleared"


@tool(registry=registry)
def break_glass(reason: str) -> str:
    """Always fails: the door shows a tool's error."""
    raise RuntimeError(f"the glass is unbreakable ({reason})")


def types(run: dict[str, Any]) -> list[str]:
    """The chunk types a stream carried, without the transient notices."""
    return [c["type"] for c in run["chunks"] if c["type"] != "data-durable-agent"]


async def test_the_ai_sdk_reads_every_part_type_of_a_reply_in_order(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Three requests of one chat: a reply that reasons and asks to run a call (the
    stream ends with the approval request; the tool has not run), the page's approval
    (the tool runs, another fails, the answer streams), and a message whose model call
    fails for good (an ``error``)."""
    wiped.clear()
    asking = assistant_calls(("wipe_cache", {"name": "tiles"}))
    script = [
        asking.model_copy(update={"reasoning": "the tiles cache is stale"}),
        assistant_calls(("break_glass", {"reason": "test"})),
        assistant_text("tiles cleared", reasoning="it worked"),
        error_reply(401, "Incorrect API key provided"),
    ]
    with ScriptedProvider(script) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache", "break_glass"], registry, tmp_path
        ) as (client, base):
            agents = AgentClient(client, task_queue=task_queue)
            api, chat = f"{base}/api/ai-sdk/chat", f"chat-{task_queue}"
            said = user_message("u1", "clear the tiles cache")
            first = await chat_request(api, chat, [said])
            session = f"conversation-{chat}"
            pending = (await agents.session(session).status()).pending_approvals
            waited = list(wiped)
            approved = answered(first["message"], True)
            second = await chat_request(api, chat, [said, approved])
            again = user_message("u2", "and the maps cache")
            third = await chat_request(api, chat, [said, second["message"], again])
            array = await agents.session(session).messages()
    assert first["error"] is None and second["error"] is None
    assert waited == [] and len(pending) == 1  # it waited: the tool had not run
    assert types(first) == [
        "start",
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "finish-step",
        "tool-approval-request",
        "finish",
    ]
    request = (
        first["chunks"][-2] if types(first)[-2:] == ["tool-approval-request", "finish"] else None
    )
    request = next(c for c in first["chunks"] if c["type"] == "tool-approval-request")
    call = next(c for c in first["chunks"] if c["type"] == "tool-input-available")
    assert request["approvalId"] == pending[0].approval_id
    assert request["toolCallId"] == call["toolCallId"] and call["input"] == {"name": "tiles"}
    assert first["chunks"][0]["messageId"] == f"{chat}-m1"
    [part] = [p for p in first["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert part["state"] == "approval-requested" and part["toolName"] == "wipe_cache"
    # the approval: the tool ran as the caller decided, and the reply went on
    assert wiped == ["tiles"]
    assert types(second) == [
        "start",
        "tool-output-available",
        "start-step",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "finish-step",
        "tool-output-error",
        "start-step",
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    tools = [p for p in second["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert [(p["toolName"], p["state"]) for p in tools] == [
        ("wipe_cache", "output-available"),
        ("break_glass", "output-error"),
    ]
    assert tools[0]["output"] == "cache tiles cleared"
    assert "unbreakable" in tools[1]["errorText"]
    text = [p["text"] for p in second["message"]["parts"] if p["type"] == "text"]
    assert text == ["tiles cleared"]
    # the model refused for good: an error, and the stream still closes
    assert "error" in types(third) and types(third)[-1] == "finish"
    error = next(c for c in third["chunks"] if c["type"] == "error")
    assert "Incorrect API key" in error["errorText"] and "Incorrect API key" in third["error"]
    assert [m.role for m in array][:2] == ["user", "assistant"]
    assert array[0].id == "u1" and len(provider.requests) == 4


def as_kept(message: dict[str, Any]) -> dict[str, Any]:
    """A UI message without what the array does not keep: the ids the stream gave its
    reasoning parts, and a decided call's approval id and the words it was asked with."""
    parts = []
    for part in message["parts"]:
        part = {k: v for k, v in part.items() if not (part["type"] == "reasoning" and k == "id")}
        approval = part.get("approval")
        if approval is not None and "approved" in approval:
            kept = {k: v for k, v in approval.items() if k not in ("id", "requestReason")}
            part = {**part, "approval": kept}
        parts.append(part)
    return {**message, "parts": parts}


async def test_a_chats_past_messages_load_as_the_ui_messages_the_page_built(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Three exchanges (a call approved, one that fails, one denied, one still waiting),
    then ``GET .../messages``: the ``ai`` package's own check takes the list whole, it is
    what the page built from the streams, every read gives the same ids, and a page that
    loaded it answers the waiting call, which runs once."""
    wiped.clear()
    asking = assistant_calls(("wipe_cache", {"name": "tiles"}))
    script = [
        asking.model_copy(update={"reasoning": "the tiles cache is stale"}),
        assistant_calls(("break_glass", {"reason": "test"})),
        assistant_text("tiles cleared", reasoning="it worked"),
        assistant_calls(("wipe_cache", {"name": "maps"})),
        assistant_text("maps left alone"),
        assistant_calls(("wipe_cache", {"name": "roads"})),
        assistant_text("roads cleared"),
    ]
    with ScriptedProvider(script) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache", "break_glass"], registry, tmp_path
        ) as (_, base):
            api, chat = f"{base}/api/ai-sdk/chat", f"chat-{task_queue}"
            tiles = user_message("u1", "clear the tiles cache")
            first = await chat_request(api, chat, [tiles])
            second = await chat_request(api, chat, [tiles, answered(first["message"], True)])
            maps = user_message("u2", "and the maps cache")
            shown = [tiles, second["message"], maps]
            third = await chat_request(api, chat, shown)
            fourth = await chat_request(
                api, chat, [*shown[:2], maps, answered(third["message"], False, "no")]
            )
            roads = user_message("u3", "and the roads cache")
            shown = [*shown, fourth["message"], roads]
            fifth = await chat_request(api, chat, shown)
            shown.append(fifth["message"])
            address = f"{api}/{chat}/messages"
            async with httpx.AsyncClient(timeout=60) as http:
                loaded = (await http.get(address)).json()
                again = (await http.get(address)).json()
                waited = list(wiped)
                # the page reloaded: it answers the waiting call from the list it loaded
                answer = answered(loaded[-1], True)
                sixth = await chat_request(api, chat, [*loaded[:-1], answer])
                after = (await http.get(address)).json()
    checked = await validated(loaded)
    assert checked["success"], checked["error"]
    assert checked["data"] == loaded, "the AI SDK kept every field as the door wrote it"
    assert again == loaded
    assert [m["id"] for m in loaded] == [
        "u1",
        f"{chat}-m1",
        "u2",
        f"{chat}-m7",
        "u3",
        f"{chat}-m11",
    ]
    assert [m["id"] for m in loaded] == [m["id"] for m in shown]
    # what the page built from the streams, but for what the array does not keep
    assert [as_kept(m) for m in loaded[:-1]] == [as_kept(m) for m in shown[:-1]]
    tools = [
        (p["input"], p["state"]) for m in loaded for p in m["parts"] if p["type"] == "dynamic-tool"
    ]
    assert tools == [
        ({"name": "tiles"}, "output-available"),
        ({"reason": "test"}, "output-error"),
        ({"name": "maps"}, "output-denied"),
        ({"name": "roads"}, "approval-requested"),
    ]
    [request] = [c for c in fifth["chunks"] if c["type"] == "tool-approval-request"]
    [waiting] = [p for p in loaded[-1]["parts"] if p["type"] == "dynamic-tool"]
    assert waiting["approval"] == {"id": request["approvalId"], "requestReason": request["reason"]}
    assert waited == ["tiles"] and wiped == ["tiles", "roads"], "the roads call ran once"
    assert sixth["error"] is None and sixth["message"]["id"] == f"{chat}-m11"
    assert after[:-1] == loaded[:-1] and after[-1]["id"] == loaded[-1]["id"]
    texts = [p["text"] for p in after[-1]["parts"] if p["type"] == "text"]
    assert texts == ["roads cleared"] and len(provider.requests) == 7


async def test_a_denied_call_never_runs_and_the_page_sees_it_denied(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    wiped.clear()
    script = [assistant_calls(("wipe_cache", {"name": "maps"})), assistant_text("left alone")]
    with ScriptedProvider(script) as provider:
        async with served(
            temporal_env, task_queue, provider, ["wipe_cache"], registry, tmp_path
        ) as (client, base):
            api, chat = f"{base}/api/ai-sdk/chat", f"chat-{task_queue}"
            said = user_message("u1", "clear the maps cache")
            first = await chat_request(api, chat, [said])
            denied = answered(first["message"], False, "not today")
            second = await chat_request(api, chat, [said, denied])
            # the page lost that stream and sends its answer again: nothing is decided twice
            again = await chat_request(api, chat, [said, denied])
            array = (
                await AgentClient(client, task_queue=task_queue)
                .session(f"conversation-{chat}")
                .messages()
            )
    assert second["error"] is None and again["error"] is None and wiped == []
    assert [p["text"] for p in again["message"]["parts"] if p["type"] == "text"] == ["left alone"]
    assert len(provider.requests) == 2 and len(array) == 4
    assert types(second)[:2] == ["start", "tool-output-denied"]
    [part] = [p for p in second["message"]["parts"] if p["type"] == "dynamic-tool"]
    assert part["state"] == "output-denied"
    result = array[2]
    assert result.role == "tool" and result.approval is not None  # type: ignore[union-attr]
    assert result.approval.decision == "denied"  # type: ignore[union-attr]
    assert result.approval.reason == "not today"  # type: ignore[union-attr]


async def test_resume_stream_replays_the_reply_under_way_and_is_empty_after(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The page goes away mid-reply; the transport's ``reconnectToStream`` (``GET
    .../{id}/stream``) gets the reply from its start to its end; once it is in, there
    is nothing to resume (204). Sending the same user message again sends nothing."""
    released = threading.Event()
    answer = paced(assistant_text("a long answer"), 0.01)
    held = dataclasses.replace(answer, hold=released, hold_after=len(answer.chunks) // 2)
    with ScriptedProvider([held]) as provider:
        async with served(temporal_env, task_queue, provider, [], registry, tmp_path) as (
            client,
            base,
        ):
            api, chat = f"{base}/api/ai-sdk/chat", f"chat-{task_queue}"
            said = user_message("u-once", "tell me a story")
            body = {"id": chat, "messages": [said], "trigger": "submit-message"}
            async with (
                httpx.AsyncClient(base_url=base, timeout=60) as http,
                http.stream("POST", "/api/ai-sdk/chat", json=body) as response,
            ):
                header = response.headers.get("x-vercel-ai-ui-message-stream")
                async for event in read_sse(response):  # gone mid-answer
                    if event.data["type"] == "text-delta":
                        break

            def on_chunk(chunk: dict[str, Any]) -> None:
                if chunk["type"] == "start":  # it follows the reply now
                    released.set()

            back = await chat_request(api, chat, [said], on_chunk, resume=True)
            nothing = await chat_request(api, chat, [said], resume=True)
            resent = await chat_request(api, chat, [said])
            array = (
                await AgentClient(client, task_queue=task_queue)
                .session(f"conversation-{chat}")
                .messages()
            )
    assert header == "v1"
    assert back["error"] is None and back["chunks"][0]["type"] == "start"
    assert back["chunks"][-1]["type"] == "finish"
    text = [p["text"] for p in back["message"]["parts"] if p["type"] == "text"]
    assert text == ["a long answer"]
    assert nothing["status"] == 204 and nothing["chunks"] == []
    assert [p["text"] for p in resent["message"]["parts"] if p["type"] == "text"] == [
        "a long answer"
    ]
    assert [m.role for m in array] == ["user", "assistant"] and len(provider.requests) == 1


async def test_another_users_chat_an_unknown_approval_and_what_the_door_cannot_take(
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
            api, chat = f"{base}/api/ai-sdk/chat", f"chat-{task_queue}"
            as_alice = {"Authorization": f"Bearer {alice}"}
            as_bob = {"Authorization": f"Bearer {bob}"}
            said = user_message("u1", "clear maps")
            first = await chat_request(api, chat, [said], headers=as_alice)
            session = f"conversation-token~alice~{chat}"
            before = await agents.session(session).messages()
            approved = answered(first["message"], True)
            stolen = await chat_request(api, chat, [said, approved], headers=as_bob)
            peeked = await chat_request(api, chat, [said], headers=as_bob, resume=True)
            async with httpx.AsyncClient(timeout=60) as http:
                read = await http.get(f"{api}/{chat}/messages", headers=as_bob)
                mine = await http.get(f"{api}/{chat}/messages", headers=as_alice)
                unbegun = await http.get(f"{api}/never-{chat}/messages", headers=as_alice)
            forged = answered(first["message"], True)
            for part in forged["parts"]:
                if part["type"] == "dynamic-tool":
                    part["approval"]["id"] = "not-waiting"
            unknown = await chat_request(api, chat, [said, forged], headers=as_alice)
            async with httpx.AsyncClient(base_url=base, timeout=60, headers=as_alice) as http:
                file_part = {"type": "file", "mediaType": "image/png", "url": "data:,x"}
                with_file = {
                    "id": chat,
                    "messages": [{"id": "u9", "role": "user", "parts": [file_part]}],
                }
                files = await http.post("/api/ai-sdk/chat", json=with_file)
                again = {"id": chat, "messages": [said], "trigger": "regenerate-message"}
                regenerate = await http.post("/api/ai-sdk/chat", json=again)
                huge = {"id": chat, "messages": [user_message("u8", "x" * 1_100_000)]}
                oversized = await http.post("/api/ai-sdk/chat", json=huge)
            after = await agents.session(session).messages()
            still = await agents.session(session).status()
    # bob's requests name his own chat of that id, which has no session: nothing of alice's
    assert stolen["status"] == 404 and stolen["chunks"] == []
    assert peeked["status"] == 204 and peeked["chunks"] == []
    assert read.status_code == 404 and "clear maps" not in read.text
    assert "has no messages yet" in read.json()["error"]
    assert [m["id"] for m in mine.json()] == ["u1", f"{chat}-m1"], "alice reads her own"
    assert unbegun.status_code == 404 and unbegun.json() == read.json() | {
        "error": read.json()["error"].replace(chat, f"never-{chat}")
    }
    assert unknown["status"] == 409 and "not waiting" in unknown["error"]
    assert [p.approval_id for p in still.pending_approvals] == [
        next(c for c in first["chunks"] if c["type"] == "tool-approval-request")["approvalId"]
    ]
    assert wiped == [] and after == before, "nothing was decided or sent"
    assert files.status_code == 400 and "text parts only" in files.json()["error"]
    assert regenerate.status_code == 400 and regenerate.json()["field"] == "trigger"
    assert oversized.status_code == 413
    assert len(provider.requests) == 1


async def test_an_approval_from_the_page_is_signed_with_the_callers_key(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The owner takes only signed decisions from alice: her answer through the AI SDK
    door is signed with her approver key (the gateway holds it, as for every door) and
    the call runs; carol, whose key the gateway does not hold, decides nothing."""
    wiped.clear()
    alice_key = ApproverKey.generate("alice")
    keys_dir = tmp_path / "approver-keys"
    keys_dir.mkdir()
    (keys_dir / "token:alice.key").write_bytes(b"alice\n" + alice_key.private_pem())
    workers = ApproverKeys.from_json(json.dumps({"alice": alice_key.public_pem()}))
    alice, carol = "alice-token-0123456789", "carol-token-0123456789"
    monkeypatch.setenv("DURABLE_AGENT_GATEWAY_TOKENS", f"alice={alice},carol={carol}")
    monkeypatch.setenv("DURABLE_AGENT_GATEWAY_APPROVER_KEYS", str(keys_dir))
    script = [
        assistant_calls(("wipe_cache", {"name": "a"})),
        assistant_text("done"),
        assistant_calls(("wipe_cache", {"name": "c"})),
    ]
    with ScriptedProvider(script) as provider:
        spec = tmp_path / "spec.json"
        signed = spec_for(provider, ["wipe_cache"], approvals={"approvers": ["alice"]}, session={})
        spec.write_text(signed.model_dump_json())
        async with running_worker(
            temporal_env, task_queue, registry, approver_keys=workers
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                api, chat = f"{base}/api/ai-sdk/chat", f"chat-{task_queue}"
                as_alice = {"Authorization": f"Bearer {alice}"}
                said = user_message("u1", "wipe a")
                first = await chat_request(api, chat, [said], headers=as_alice)
                approved = answered(first["message"], True)
                second = await chat_request(api, chat, [said, approved], headers=as_alice)
                session = f"conversation-token~alice~{chat}"
                messages = await agents.session(session).messages()
                as_carol = {"Authorization": f"Bearer {carol}"}
                asked = user_message("u1", "wipe c")
                hers = await chat_request(api, chat, [asked], headers=as_carol)
                refused = await chat_request(
                    api, chat, [asked, answered(hers["message"], True)], headers=as_carol
                )
                still = await agents.session(f"conversation-token~carol~{chat}").status()
    assert second["error"] is None, second
    [ran] = [m for m in messages if isinstance(m, ToolMessage)]
    assert ran.approval is not None and (ran.approval.by, ran.approval.verified) == ("alice", True)
    assert refused["status"] == 409 and refused["chunks"] == [], refused
    assert len(still.pending_approvals) == 1 and wiped == ["a"]


@tool(registry=registry)
def look_up(name: str) -> str:
    """Read a cache's size (no one approves a read)."""
    return f"cache {name}: 3 MB"


async def test_a_sub_agents_call_waits_on_the_call_that_started_it_never_on_another(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The model reads a cache and asks a helper in one batch; the helper's own call
    waits for a person. A reloaded page is shown the wait on the helper's call, never
    on the read beside it (whose input a person would approve, running the helper's
    wipe instead), and an answer that pairs the helper's approval with the read
    decides nothing; on the helper's call it does."""
    wiped.clear()
    script = [
        assistant_calls(("look_up", {"name": "maps"}), ("helper", {"task": "wipe prod"})),
        assistant_calls(("wipe_cache", {"name": "prod"})),  # the helper's
        assistant_text("prod wiped"),  # the helper's answer
        assistant_text("done"),  # the parent's
    ]
    with ScriptedProvider(script) as provider:
        child = spec_for(provider, ["wipe_cache"]).model_dump(mode="json")
        helper = {"name": "helper", "description": "helps", "spec": child}
        spec = tmp_path / "spec.json"
        spec.write_text(
            spec_for(provider, ["look_up"], agents=[helper], session={}).model_dump_json()
        )
        async with running_worker(temporal_env, task_queue, registry) as client:
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                api, chat = f"{base}/api/ai-sdk/chat", f"chat-{task_queue}"
                said = user_message("u1", "read the maps cache and have prod wiped")
                session = AgentClient(client, task_queue=task_queue).session(f"conversation-{chat}")
                async with httpx.AsyncClient(timeout=30) as http:
                    body = {"id": chat, "messages": [said]}
                    async with http.stream("POST", api, json=body) as started:
                        assert started.status_code == 200
                    for _ in range(300):
                        if (await session.status()).pending_approvals:
                            break
                        await asyncio.sleep(0.1)
                    shown = (await http.get(f"{api}/{chat}/messages")).json()
                    [reply] = [m for m in shown if m["role"] == "assistant"]
                    by_name = {p["toolName"]: p for p in reply["parts"] if "toolName" in p}
                    asked = by_name["helper"].get("approval") or by_name["look_up"]["approval"]
                    misplaced = dict(by_name["look_up"])
                    misplaced.update(
                        state="approval-responded", approval={**asked, "approved": True}
                    )
                    answer = {**reply, "parts": [misplaced]}
                    refused = await http.post(api, json={"id": chat, "messages": [said, answer]})
                    not_yet = list(wiped)
                    rightly = dict(by_name["helper"])
                    rightly.update(state="approval-responded", approval={**asked, "approved": True})
                    answer = {**reply, "parts": [rightly]}
                    async with http.stream(
                        "POST", api, json={"id": chat, "messages": [said, answer]}
                    ) as decided:
                        status_code = decided.status_code
                await asyncio.wait_for(session.wait(timeout=60), 60)
    assert "/" in asked["id"], "the helper's own approval, decided through the parent"
    read = by_name["look_up"]
    assert read["state"] != "approval-requested" and "approval" not in read, "it waits for no one"
    assert by_name["helper"]["state"] == "approval-requested", by_name
    assert refused.status_code == 409 and not_yet == [], "paired with the read: nothing decided"
    assert status_code == 200 and wiped == ["prod"]
