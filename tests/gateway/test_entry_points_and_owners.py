"""One owner check behind every entry point of the gateway, over real HTTP against
``durable-agent serve`` with users and codec keys, the workers encrypting as in
production.

A session started by ``ann`` waits for a person to approve ``wipe``. Every entry point (the
REST API, conversations, the event stream, AG-UI, Chat Completions, Responses, the codec
endpoint) is tried by another user, by a user whose name extends the owner's, with no
credentials, and from a page on another site. None of them reads a byte of the
conversation, writes into it, decides its call or ends it: the array, the waiting call
and the tool's side effects are as they were. Then the owner does each, and it works.

A conversation id names a conversation of its caller only: ``ann``'s ``marie-t1`` and
``ann-marie``'s ``t1`` are two sessions, and a conversation begun under the old ids
(where they were one) goes on for its owner alone; a resumed conversation keeps its
owner.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets as random_secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import MessageToDict
from temporalio.api.common.v1 import Payloads
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.boundary import SessionStatus
from durable_agent._payloads.encryption import CodecKeys, with_encryption
from durable_agent._payloads.storage import lean_data_converter
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.gateway._openai_responses import response_id
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.support.agent_harness import running_worker, spec_for, wait_for
from tests.support.gateway_harness import gateway

CANARY = f"entry-canary-{random_secrets.token_hex(8)}"
KEYS = CodecKeys.generate("k1")
TOKENS = {
    "ann": "ann-token-0123456789abcdef",
    "ann-marie": "ann-marie-token-0123456789",
    "bob": "bob-token-0123456789abcdefgh",
    "ops": "ops-token-0123456789abcdefgh",
}
UI = "http://ui.example:8233"
EVIL = "https://evil.example"
wiped: list[str] = []
registry = Registry()


@tool(registry=registry, approval="always")
def wipe(name: str) -> str:
    """Wipe a store (a person approves)."""
    wiped.append(name)
    return f"{name} wiped"


def model(request: RecordedRequest) -> AssistantMessage:
    """Asks to wipe what the user names after "please wipe"; otherwise answers."""
    messages = request.body["messages"]
    said = messages[-1].get("content") or ""
    if messages[-1]["role"] == "user" and "please wipe" in said:
        return assistant_calls(("wipe", {"name": said.split("please wipe", 1)[1].strip()}))
    return assistant_text(f"noted ({len(messages)} messages)")


def bearer(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


@asynccontextmanager
async def served(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> AsyncIterator[tuple[AgentClient, httpx.AsyncClient]]:
    """A worker that encrypts with the codec keys, and the gateway with users (``ops`` an
    admin) and the same keys: the encrypting client, and an HTTP client for the gateway."""
    target = temporal_env.client.service_client.config.target_host
    encrypting = await Client.connect(
        target, data_converter=with_encryption(lean_data_converter, CodecKeys.parse(KEYS))
    )
    with ScriptedProvider(responder=model) as provider:
        spec_file = tmp_path / "spec.json"
        spec_file.write_text(spec_for(provider, ["wipe"], session={}).model_dump_json())
        async with running_worker(temporal_env, task_queue, registry, client=encrypting):
            env = {
                "DURABLE_AGENT_GATEWAY_TOKENS": ",".join(f"{u}={t}" for u, t in TOKENS.items()),
                "DURABLE_AGENT_GATEWAY_ADMINS": "token:ops",
                "DURABLE_AGENT_CODEC_KEYS": KEYS,
            }
            with gateway(target, task_queue, spec_file, "--codec-origin", UI, **env) as base:
                async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                    yield AgentClient(encrypting, task_queue=task_queue), http


async def waiting_call(agents: AgentClient, session: str) -> str:
    async def asked() -> str | None:
        status = await agents.session(session).status()
        return status.pending_approvals[0].approval_id if status.pending_approvals else None

    found: str = await wait_for(asked, timeout=60)
    return found


async def raw_payloads(client: Client, session: str) -> list[dict[str, Any]]:
    """The messages sent to the session as Temporal stores them (encrypted), in the JSON
    form the Temporal UI posts to the codec endpoint."""
    history = await client.get_workflow_handle(session).fetch_history()
    found = [
        payload
        for event in history.events
        if event.HasField("workflow_execution_update_accepted_event_attributes")
        for payload in _update_args(event.workflow_execution_update_accepted_event_attributes)
    ]
    assert found, "the history holds the messages sent"
    return list(MessageToDict(Payloads(payloads=found))["payloads"])


def _update_args(accepted: Any) -> list[Any]:
    return list(accepted.accepted_request.input.args.payloads)


def decoded_text(answer: httpx.Response) -> str:
    """What the codec endpoint answered, its payloads' data decoded from base64."""
    if answer.status_code != 200:
        return answer.text
    return " ".join(
        base64.b64decode(p.get("data", "")).decode("latin-1") for p in answer.json()["payloads"]
    )


def agui_run(thread: str, *, resume: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": f"run-{random_secrets.token_hex(4)}",
        "messages": [],
        "tools": [],
        "context": [],
    }
    if resume is not None:
        body["resume"] = resume
    return body


def ai_sdk_approval(chat: str, approval: str) -> dict[str, Any]:
    """What the AI SDK's transport posts after ``addToolApprovalResponse``: the chat's
    assistant message, its tool part answered."""
    part = {
        "type": "dynamic-tool",
        "toolName": "wipe_cache",
        "toolCallId": "call-0",
        "state": "approval-responded",
        "input": {},
        "approval": {"id": approval, "approved": True},
    }
    said = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    replied = {"id": "a1", "role": "assistant", "parts": [part]}
    return {"id": chat, "messages": [said, replied], "trigger": "submit-message"}


async def try_every_entry_point(
    http: httpx.AsyncClient,
    headers: dict[str, str],
    session: str,
    call: str,
    conversation: str,
    payloads: list[dict[str, Any]],
) -> dict[str, httpx.Response]:
    """Each entry point, tried once as ``headers`` say, on the owner's session (or the caller's
    conversation of the same id): the answers, by entry point."""
    at = f"/api/sessions/{session}"
    json_headers = {**headers, "Content-Type": "application/json"}
    ui = {**headers, "X-Namespace": "default"}
    if "Origin" not in ui:
        ui["Origin"] = UI
    tries: dict[str, Any] = {
        "list sessions": http.get("/api/sessions", headers=headers),
        "read messages": http.get(f"{at}/messages", headers=headers),
        "read status": http.get(f"{at}/status", headers=headers),
        "event stream": http.get(f"{at}/events", headers=headers),
        "send a message": http.post(f"{at}/messages", json={"text": "hijack"}, headers=headers),
        "approve": http.post(f"{at}/approvals/{call}/approve", json={}, headers=headers),
        "deny": http.post(f"{at}/approvals/{call}/deny", json={}, headers=headers),
        "fork": http.post(f"{at}/fork", json={"at": 1}, headers=headers),
        "diff": http.get(f"{at}/diff/{session}", headers=headers),
        "conversation": http.post(
            f"/api/conversations/{conversation}/messages",
            json={"text": "hello"},
            headers=headers,
        ),
        "AG-UI rejoin": http.post("/api/agui", json=agui_run(conversation), headers=json_headers),
        "AG-UI resume": http.post(
            "/api/agui",
            headers=json_headers,
            json=agui_run(
                conversation,
                resume=[{"interruptId": call, "status": "resolved", "payload": {"approved": True}}],
            ),
        ),
        "AI SDK approval": http.post(
            "/api/ai-sdk/chat",
            headers=json_headers,
            json=ai_sdk_approval(conversation, call),
        ),
        "AI SDK resume stream": http.get(
            f"/api/ai-sdk/chat/{conversation}/stream", headers=headers
        ),
        "AI SDK past messages": http.get(
            f"/api/ai-sdk/chat/{conversation}/messages", headers=headers
        ),
        "chat by session header": http.post(
            "/v1/chat/completions",
            headers={**headers, "Durable-Session-Id": session},
            json={"model": "durable-agent", "messages": [{"role": "user", "content": "hi"}]},
        ),
        "responses, previous response": http.post(
            "/v1/responses",
            headers=headers,
            json={
                "model": "durable-agent",
                "input": "hi",
                "previous_response_id": response_id(session, 1),
            },
        ),
        "responses, retrieve": http.get(
            f"/v1/responses/{response_id(session, 1)}", headers=headers
        ),
        "codec decode": http.post("/codec/decode", json={"payloads": payloads}, headers=ui),
    }
    answers = dict(zip(tries, await asyncio.gather(*tries.values()), strict=True))
    # the end last: a success would end the session the others are tried on
    answers["end"] = await http.post(f"{at}/end", json={}, headers=headers)
    return answers


@pytest.mark.parametrize("who", ["bob", "ann-marie", "nobody", "a page on another site"])
async def test_no_entry_point_lets_anyone_but_the_owner_see_or_act(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path, who: str
) -> None:
    wiped.clear()
    # ann's conversation marie-T and ann-marie's T were one session id before principals
    tag = task_queue.removeprefix("tq-")
    own, conversation = f"marie-{tag}", f"marie-{tag}"
    if who == "ann-marie":
        conversation = tag
    headers = {
        "bob": bearer("bob"),
        "ann-marie": bearer("ann-marie"),
        "nobody": {},
        "a page on another site": {**bearer("ann"), "Origin": EVIL},
    }[who]
    async with served(temporal_env, task_queue, tmp_path) as (agents, http):
        started = await http.post(
            f"/api/conversations/{own}/messages",
            headers=bearer("ann"),
            json={"text": f"please wipe prod-{CANARY}"},
        )
        assert started.status_code == 202, started.text
        session = started.json()["session_id"]
        call = await waiting_call(agents, session)
        before = await agents.session(session).status()
        payloads = await raw_payloads(agents.temporal, session)
        answers = await try_every_entry_point(http, headers, session, call, conversation, payloads)
        after = await agents.session(session).status()
        owner = await agents.session(session).owner()
        ran = list(wiped)
        # the owner's turn: the entry points answer her
        ann = bearer("ann")
        read = await http.get(f"/api/sessions/{session}/messages", headers=ann)
        past = await http.get(f"/api/ai-sdk/chat/{own}/messages", headers=ann)
        decoded = await http.post(
            "/codec/decode",
            json={"payloads": payloads},
            headers={**ann, "Origin": UI, "X-Namespace": "default"},
        )
        approved = await http.post(
            f"/api/sessions/{session}/approvals/{call}/approve", json={}, headers=ann
        )
        await agents.session(session).wait(after=before.message_count, timeout=60)
        ended = await http.post(f"/api/sessions/{session}/end", json={}, headers=ann)
    for entry, answer in answers.items():
        assert CANARY not in answer.text, f"{who} read the conversation through {entry}"
        if who == "nobody":
            assert answer.status_code == 401, (entry, answer.status_code, answer.text)
        elif who == "a page on another site":
            assert answer.status_code == 403, (entry, answer.status_code, answer.text)
        elif entry in ("list sessions",):
            assert session not in answer.text
        elif entry in (
            "conversation",
            "AG-UI rejoin",
            "AG-UI resume",
            "AI SDK approval",
            "AI SDK resume stream",
            "AI SDK past messages",
        ):
            # the same conversation id is the caller's own conversation, never ann's
            assert session not in answer.text
        elif entry == "codec decode":
            assert answer.status_code == 200 and CANARY not in decoded_text(answer)
        else:
            assert answer.status_code == 404, (entry, answer.status_code, answer.text)
    # nothing read, written, approved, ended or run
    assert _unchanged(before, after), (before, after)
    assert owner == "token:ann" and ran == []
    # and the owner may
    assert CANARY in read.text and CANARY in decoded_text(decoded) and CANARY in past.text
    assert approved.status_code == ended.status_code == 202, (approved.text, ended.text)
    assert wiped == [f"prod-{CANARY}"]


def _unchanged(before: SessionStatus, after: SessionStatus) -> bool:
    return (
        after.phase == before.phase == "awaiting_approval"
        and after.message_count == before.message_count
        and after.queued_messages == before.queued_messages == 0
        and [p.approval_id for p in after.pending_approvals]
        == [p.approval_id for p in before.pending_approvals]
    )


async def test_a_conversation_is_its_callers_and_keeps_its_owner_when_resumed(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """``ann``'s ``marie-t1`` and ``ann-marie``'s ``t1`` are two sessions; a conversation
    begun under the old ids (``conversation-ann-marie-t1``, which both named) goes on
    for the user its memo names only; after its owner ends it, another user's message
    to the same id starts their own, and the owner resumes hers."""
    wiped.clear()
    tag = task_queue.removeprefix("tq-")  # ids of this test's own (the server is shared)
    async with served(temporal_env, task_queue, tmp_path) as (agents, http):
        spec = (tmp_path / "spec.json").read_text()
        legacy = await agents.start(
            spec,
            f"my secret plan {CANARY}",
            session_id=f"conversation-ann-marie-{tag}",
            owner="ann-marie",
        )
        await agents.session(legacy).wait(after=0, timeout=60)
        his = await http.post(
            f"/api/conversations/marie-{tag}/messages",
            headers=bearer("ann"),
            json={"text": "hello"},
        )
        hers = await http.post(
            f"/api/conversations/{tag}/messages",
            headers=bearer("ann-marie"),
            json={"text": "and more"},
        )
        assert his.status_code == hers.status_code == 202, (his.text, hers.text)
        assert his.json()["session_id"] == f"conversation-token~ann~marie-{tag}"
        assert hers.json()["session_id"] == legacy  # her conversation, under its old id
        over_agui = await http.post(
            "/api/agui", json=agui_run(f"marie-{tag}"), headers=bearer("ann")
        )
        await agents.session(legacy).wait(after=2, timeout=60)
        await agents.session(legacy).end(by="ann-marie")
        await wait_for(lambda: agents.session(legacy).has_ended(), timeout=60)
        again = await http.post(
            f"/api/conversations/marie-{tag}/messages",
            headers=bearer("ann"),
            json={"text": "still mine?"},
        )
        resumed = await http.post(
            f"/api/conversations/{tag}/messages",
            headers=bearer("ann-marie"),
            json={"text": "back again"},
        )
        assert resumed.status_code == 202, resumed.text
        await agents.session(legacy).wait(after=4, timeout=60)
        owner = await agents.session(legacy).owner()
        array = await agents.session(legacy).messages()
        listed = await http.get("/api/sessions", headers=bearer("ann-marie"))
    assert CANARY not in over_agui.text
    assert again.json()["session_id"] == f"conversation-token~ann~marie-{tag}"
    assert owner == "ann-marie", "a resumed conversation keeps its owner"
    said = [m.content for m in array if m.role == "user"]
    assert said == [f"my secret plan {CANARY}", "and more", "back again"]
    assert legacy in listed.text


async def test_tokens_travel_in_headers_only_and_names_are_apart_by_source(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The event stream takes no token in its URL (it would end up in access logs); an
    admin is named with its source, so a user of another source with the same name is
    not one."""
    async with served(temporal_env, task_queue, tmp_path) as (agents, http):
        session = await agents.start((tmp_path / "spec.json").read_text(), "hi", owner="token:ann")
        by_url = await http.get(
            f"/api/sessions/{session}/events", params={"access_token": TOKENS["ann"]}
        )
        admin = await http.get(f"/api/sessions/{session}/status", headers=bearer("ops"))
    assert by_url.status_code == 401
    assert admin.status_code == 200
    from durable_agent.gateway import AccessError, GatewayAccess
    from durable_agent.gateway._guard import Principal

    with pytest.MonkeyPatch.context() as env:
        env.setenv("DURABLE_AGENT_GATEWAY_TOKENS", "ops=ops-token-0123456789abcdefgh")
        env.setenv("DURABLE_AGENT_GATEWAY_ADMINS", "ops")
        access = GatewayAccess.from_environment("127.0.0.1")
        assert access.is_admin(Principal("token", "ops"))
        assert not access.is_admin(Principal("jwt", "ops"))
        assert not access.is_admin(Principal("proxy", "ops"))
        env.setenv("DURABLE_AGENT_GATEWAY_ADMINS", "root")
        with pytest.raises(AccessError, match="token:root is not a user of"):
            GatewayAccess.from_environment("127.0.0.1")
        env.setenv("DURABLE_AGENT_GATEWAY_ADMINS", "token:ops")
        env.setenv("DURABLE_AGENT_CODEC_TOKEN", "old-style-token")
        with pytest.raises(AccessError, match="DURABLE_AGENT_CODEC_TOKEN is gone"):
            GatewayAccess.from_environment("127.0.0.1")
    assert Principal("jwt", "ops").owns("jwt:ops") and not Principal("token", "ops").owns("jwt:ops")
    assert json.dumps(str(Principal("proxy", "ann"))) == '"proxy:ann"'


async def test_the_codec_endpoint_stops_reading_a_body_over_its_limit(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The limit is counted while the body arrives: a 200 MB upload of no declared size
    is refused once it passes 4 MB (the gateway keeps nothing past that: its memory,
    ``./run bench-gateway-body``), and the gateway answers the next request as before.
    One that declares a size over the limit is refused too."""

    async def upload() -> AsyncIterator[bytes]:
        for _ in range(3200):  # 200 MB, chunked
            yield b" " * 65536

    headers = {**bearer("ops"), "Origin": UI, "Content-Type": "application/json"}
    async with served(temporal_env, task_queue, tmp_path) as (_, http):
        try:
            answer: int | None = (
                await http.post("/codec/decode", content=upload(), headers=headers)
            ).status_code
        except httpx.HTTPError:  # the gateway closed the connection mid-upload
            answer = None
        declared = await http.post("/codec/decode", content=b" " * 5_000_000, headers=headers)
        healthy = await http.get("/healthz")
    assert answer in (413, None)
    assert declared.status_code == 413
    assert healthy.status_code == 200
