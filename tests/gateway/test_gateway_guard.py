"""The gateway's entry point, over real HTTP against ``durable-agent serve``: what a page on
another site (or a rebound DNS name) can send gets nothing done; bodies are JSON and
bounded; with tokens, sessions belong to who started them, decisions are recorded as
the authenticated user, and nobody else sees or decides them; a sub-agent's approval id
(with its ``/``) is routable; off loopback the gateway does not start without tokens."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.approvals import ApproverKey, ApproverKeys
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import running_worker, spec_for, wait_for
from tests.support.gateway_harness import gateway
from tests.support.recording_server import RecordingServer

ROOT = Path(__file__).parent.parent.parent
wiped: list[str] = []
registry = Registry()


@tool(registry=registry, approval="always")
def wipe(name: str) -> str:
    """Wipe a store (a person approves)."""
    wiped.append(name)
    return f"{name} wiped"


def address_of(env: WorkflowEnvironment) -> str:
    return str(env.client.service_client.config.target_host)


def spec_file(tmp_path: Path, provider: ScriptedProvider, **fields: Any) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(spec_for(provider, ["wipe"], **fields).model_dump_json())
    return path


async def pending_id(agents: AgentClient, session: str) -> str:
    async def asked() -> str | None:
        status = await agents.session(session).status()
        return status.pending_approvals[0].approval_id if status.pending_approvals else None

    found: str = await wait_for(asked, timeout=60)
    return found


async def test_a_page_on_another_site_gets_nothing_done(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    wiped.clear()
    script = [assistant_calls(("wipe", {"name": "prod"})), assistant_text("never")]
    with ScriptedProvider(script) as provider:
        spec = spec_file(tmp_path, provider)
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                async with httpx.AsyncClient(base_url=base, timeout=30) as http:

                    async def on_this_queue() -> list[str]:
                        query = f'TaskQueue = "{task_queue}"'
                        return [w.id async for w in client.list_workflows(query)]

                    # what a cross-site form or no-cors fetch can send: not JSON
                    form = await http.post(
                        "/api/sessions",
                        content=b"message=hi",
                        headers={"Content-Type": "text/plain"},
                    )
                    evil = {"Origin": "https://evil.example"}
                    cross = await http.post("/api/sessions", json={"message": "x"}, headers=evil)
                    rebound = await http.post(
                        "/api/sessions", json={"message": "x"}, headers={"Host": "evil.example"}
                    )
                    huge = await http.post("/api/sessions", json={"message": "x" * 2_000_000})
                    chosen = await http.post("/api/sessions", json={"session_id": "mine"})
                    too_many = await http.get("/api/sessions?limit=5000")
                    after = await on_this_queue()
                    # a session started here, its call approved from another site
                    started = await http.post("/api/sessions", json={"message": "wipe prod"})
                    session = started.json()["session_id"]
                    approval = await pending_id(agents, session)
                    approve = f"/api/sessions/{session}/approvals/{approval}/approve"
                    forged = await http.post(approve, json={"by": "ana"}, headers=evil)
                    page = await http.get("/")
                    await asyncio.sleep(0)
                    still = await agents.session(session).status()
    assert (form.status_code, form.json()["field"]) == (415, "Content-Type")
    assert (cross.status_code, cross.json()["field"]) == (403, "Origin")
    assert (rebound.status_code, rebound.json()["field"]) == (400, "Host")
    assert huge.status_code == 413
    assert chosen.status_code == 400 and chosen.json()["field"] == "session_id"
    assert too_many.status_code == 400 and "at most 1000" in too_many.json()["error"]
    assert after == [], "none of those started a session"
    assert started.status_code == 201
    assert forged.status_code == 403
    assert [p.approval_id for p in still.pending_approvals] == [approval]
    assert wiped == [], "the gated tool did not run"
    assert page.headers["content-security-policy"] == "frame-ancestors 'none'"
    assert page.headers["x-frame-options"] == "DENY"


async def test_with_tokens_sessions_belong_to_who_started_them(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wiped.clear()
    alice, bob = "alice-token-0123456789", "bob-token-0123456789ab"
    monkeypatch.setenv("DURABLE_AGENT_GATEWAY_TOKENS", f"alice={alice},bob={bob}")
    script = [assistant_calls(("wipe", {"name": "cache"})), assistant_text("wiped")]
    with ScriptedProvider(script) as provider:
        spec = spec_file(tmp_path, provider, session={"end_after_reply": True})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                    anonymous = await http.post("/api/sessions", json={"message": "x"})
                    as_alice = {"Authorization": f"Bearer {alice}"}
                    as_bob = {"Authorization": f"Bearer {bob}"}
                    started = await http.post(
                        "/api/sessions", json={"message": "wipe the cache"}, headers=as_alice
                    )
                    session = started.json()["session_id"]
                    approval = await pending_id(agents, session)
                    listed_bob = (await http.get("/api/sessions", headers=as_bob)).json()
                    listed_alice = (await http.get("/api/sessions", headers=as_alice)).json()
                    peek = await http.get(f"/api/sessions/{session}/status", headers=as_bob)
                    approve = f"/api/sessions/{session}/approvals/{approval}/approve"
                    by_bob = await http.post(approve, json={}, headers=as_bob)
                    pending = (await agents.session(session).status()).pending_approvals
                    by_alice = await http.post(approve, json={"by": "mallory"}, headers=as_alice)
                    result = await asyncio.wait_for(agents.session(session).result(), 60)
                    messages = await agents.session(session).messages()
    assert anonymous.status_code == 401
    assert started.status_code == 201
    assert session not in [s["session_id"] for s in listed_bob]
    assert session in [s["session_id"] for s in listed_alice]
    assert peek.status_code == 404 and by_bob.status_code == 404
    assert len(pending) == 1, "bob's approval changed nothing"
    assert by_alice.status_code == 202 and result.status == "done"
    [ran] = [m for m in messages if isinstance(m, ToolMessage)]
    assert ran.approval is not None and ran.approval.by == "alice", (
        "the body cannot speak for another"
    )
    assert wiped == ["cache"]


async def test_a_sub_agents_approval_is_decided_over_rest(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    wiped.clear()
    script = [
        assistant_calls(("helper", {"task": "wipe the cache"})),  # the parent
        assistant_calls(("wipe", {"name": "cache"})),  # the child
        assistant_text("cache wiped"),  # the child's answer
        assistant_text("done: cache wiped"),  # the parent's
    ]
    with ScriptedProvider(script) as provider:
        child = spec_for(provider, ["wipe"]).model_dump(mode="json")
        spec = tmp_path / "spec.json"
        parent = spec_for(
            provider, agents=[{"name": "helper", "description": "helps", "spec": child}]
        )
        spec.write_text(parent.model_dump_json())
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                    started = await http.post("/api/sessions", json={"message": "go"})
                    session = started.json()["session_id"]
                    approval = await pending_id(agents, session)
                    decided = await http.post(
                        f"/api/sessions/{session}/approvals/{approval}/approve", json={"by": "ana"}
                    )
                    result = await asyncio.wait_for(agents.session(session).result(), 60)
    assert "/" in approval, approval
    assert decided.status_code == 202, decided.text
    assert result.status == "done" and wiped == ["cache"]


def test_off_loopback_the_gateway_does_not_start_without_tokens() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DURABLE_AGENT_GATEWAY_TOKENS"}
    done = subprocess.run(
        [sys.executable, "-m", "durable_agent._cli.main", "serve", "--host", "0.0.0.0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "without DURABLE_AGENT_GATEWAY_TOKENS the gateway serves loopback only" in done.stderr


def _jwt(key: Any, kid: str, **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": "https://idp.example",
        "aud": "durable-agent-gateway",
        "iat": now,
        "exp": now + 300,
        **claims,
    }
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


async def test_an_identity_providers_token_names_the_user_whose_key_signs_the_decision(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bearer JWTs checked against the provider's JWKS (another key, another audience
    or an expired token name nobody); alice's decision, through the gateway, is signed
    with her approver key, so a session that takes only signed decisions from alice
    runs the call."""
    wiped.clear()
    idp = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(RSAAlgorithm.to_jwk(idp.public_key()))
    jwks = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}
    alice = ApproverKey.generate("alice")
    keys_dir = tmp_path / "approver-keys"
    keys_dir.mkdir()
    (keys_dir / "jwt:alice.key").write_bytes(b"alice\n" + alice.private_pem())
    workers = ApproverKeys.from_json(json.dumps({"alice": alice.public_pem()}))
    script = [assistant_calls(("wipe", {"name": "cache"})), assistant_text("wiped")]
    with RecordingServer({"/jwks.json": (200, {}, jwks)}) as idp_server:
        monkeypatch.setenv("DURABLE_AGENT_GATEWAY_JWKS_URL", f"{idp_server.url}/jwks.json")
        monkeypatch.setenv("DURABLE_AGENT_GATEWAY_AUDIENCE", "durable-agent-gateway")
        monkeypatch.setenv("DURABLE_AGENT_GATEWAY_ISSUER", "https://idp.example")
        monkeypatch.setenv("DURABLE_AGENT_GATEWAY_APPROVER_KEYS", str(keys_dir))
        with ScriptedProvider(script) as provider:
            spec = spec_file(
                tmp_path,
                provider,
                approvals={"approvers": ["alice"]},
                session={"end_after_reply": True},
            )
            async with running_worker(
                temporal_env, task_queue, registry, approver_keys=workers
            ) as client:
                agents = AgentClient(client, task_queue=task_queue)
                with gateway(address_of(temporal_env), task_queue, spec) as base:
                    async with httpx.AsyncClient(base_url=base, timeout=30) as http:

                        def bearer(token: str) -> dict[str, str]:
                            return {"Authorization": f"Bearer {token}"}

                        refused = [
                            await http.get("/api/sessions", headers=bearer(token))
                            for token in (
                                _jwt(other, "k1", sub="alice"),  # not the provider's key
                                _jwt(idp, "k1", sub="alice", aud="another-app"),
                                _jwt(idp, "k1", sub="alice", exp=int(time.time()) - 60),
                            )
                        ]
                        as_alice = bearer(_jwt(idp, "k1", sub="alice"))
                        started = await http.post(
                            "/api/sessions", json={"message": "wipe it"}, headers=as_alice
                        )
                        session = started.json()["session_id"]
                        approval = await pending_id(agents, session)
                        decided = await http.post(
                            f"/api/sessions/{session}/approvals/{approval}/approve",
                            json={},
                            headers=as_alice,
                        )
                        result = await asyncio.wait_for(agents.session(session).result(), 60)
                        messages = await agents.session(session).messages()
    assert [r.status_code for r in refused] == [401, 401, 401]
    assert started.status_code == 201 and decided.status_code == 202, decided.text
    [ran] = [m for m in messages if isinstance(m, ToolMessage)]
    assert ran.approval is not None and (ran.approval.by, ran.approval.verified) == ("alice", True)
    assert result.status == "done" and wiped == ["cache"]
    assert [s.path for s in idp_server.seen] == ["/jwks.json"], "the keys were fetched once"


@pytest.mark.parametrize("trusted", [True, False], ids=["from-the-proxy", "from-elsewhere"])
async def test_a_trusted_proxy_names_the_user_and_no_one_else_can(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    trusted: bool,
) -> None:
    """``X-Forwarded-User`` counts only on requests from the configured proxy address."""
    monkeypatch.setenv("DURABLE_AGENT_GATEWAY_PROXIES", "127.0.0.1" if trusted else "10.9.9.9")
    with ScriptedProvider([assistant_text("hi")]) as provider:
        spec = spec_file(tmp_path, provider, session={"end_after_reply": True})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            with gateway(address_of(temporal_env), task_queue, spec) as base:
                async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                    started = await http.post(
                        "/api/sessions",
                        json={"message": "hello"},
                        headers={"X-Forwarded-User": "alice"},
                    )
                    owner = (
                        await agents.session(started.json()["session_id"]).owner()
                        if started.status_code == 201
                        else None
                    )
    if trusted:
        assert started.status_code == 201 and owner == "proxy:alice"
    else:
        assert started.status_code == 401, "the header proves nothing from elsewhere"


async def test_temporals_refusals_come_back_as_json_with_their_status(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Temporal refuses a gateway served for a namespace it does not have: the answer is
    the documented JSON with Temporal's reason and a 4xx status, never a bare 500."""
    more = ("--namespace", "no-such-namespace")
    with gateway(address_of(temporal_env), task_queue, None, *more) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            answer = await http.get("/api/sessions")
    assert answer.status_code == 404, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert "no-such-namespace" in answer.json()["error"]
