"""The gateway's REST decisions in the words every other entry gives them in
(``approve``, ``deny``, ``respond``: ``DecisionRequest``, ``SessionHandle``, the CLI's
commands), each answered with what became of the call in the records' words
(``approved``, ``denied``, ``responded``); any other word is refused, naming the
right path, and decides nothing."""

from __future__ import annotations

from pathlib import Path

import httpx
from temporalio.testing import WorkflowEnvironment

from durable_agent._client.sessions import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support import cli_tools
from tests.support.agent_harness import running_worker, spec_for
from tests.support.gateway_harness import gateway

registry = Registry([cli_tools.wipe_cache])


async def test_rest_decisions_take_approve_deny_and_respond_and_refuse_other_words(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [
        assistant_calls(
            ("wipe_cache", {"name": "tiles"}),
            ("wipe_cache", {"name": "maps"}),
            ("wipe_cache", {"name": "fonts"}),
        ),
        assistant_text("done"),
    ]
    address = str(temporal_env.client.service_client.config.target_host)
    agents = AgentClient(temporal_env.client, task_queue=task_queue)
    with ScriptedProvider(script) as provider:
        spec = tmp_path / "spec.json"
        spec.write_text(spec_for(provider, ["wipe_cache"]).model_dump_json())
        async with running_worker(temporal_env, task_queue, registry):
            with gateway(address, task_queue, spec) as base:
                async with httpx.AsyncClient(base_url=base, timeout=60) as http:
                    started = await http.post("/api/sessions", json={"message": "clear"})
                    sid = started.json()["session_id"]
                    asked = await agents.session(sid).wait()
                    tiles, maps, fonts = (p.approval_id for p in asked.pending)
                    at = f"/api/sessions/{sid}/approvals"
                    past = await http.post(f"{at}/{tiles}/approved", json={"by": "ana"})
                    other = await http.post(f"{at}/{tiles}/yes", json={"by": "ana"})
                    still = await agents.session(sid).status()
                    approve = await http.post(f"{at}/{tiles}/approve", json={"by": "ana"})
                    deny = await http.post(f"{at}/{maps}/deny", json={"reason": "keep maps"})
                    respond = await http.post(
                        f"{at}/{fonts}/respond", json={"content": "fonts left as they are"}
                    )
                    await agents.session(sid).wait(after=2, answered=[tiles, maps, fonts])
                    messages = await agents.session(sid).messages()
    assert asked.kind == "approval" and len(asked.pending) == 3
    assert past.status_code == 404 and past.json()["field"] == "decision"
    assert "no decision 'approved': POST .../approve " in past.json()["error"], past.text
    assert other.status_code == 404
    assert ".../approve, .../deny or .../respond" in other.json()["error"], other.text
    assert len(still.pending_approvals) == 3, "the refused words decided nothing"
    assert (approve.status_code, approve.json()) == (202, {"decided": "approved"})
    assert (deny.status_code, deny.json()) == (202, {"decided": "denied"})
    assert (respond.status_code, respond.json()) == (202, {"decided": "responded"})
    records = [
        (m.content, m.approval.decision if m.approval else None)
        for m in messages
        if isinstance(m, ToolMessage)
    ]
    assert ("cache tiles cleared", "approved") in records
    assert ("fonts left as they are", "responded") in records, "in the tool's place"
    assert [decision for _, decision in records].count("denied") == 1
    ran = {content for content, _ in records}
    assert "cache maps cleared" not in ran and "cache fonts cleared" not in ran
    assert len(provider.requests) == 2
