"""Secrets never enter history: a canary value, referenced as ``{{secret:NAME}}`` in a
tool's arguments and bound context, reaches the tool and appears in none of the
workflow history (``temporal workflow show``), the dev server's SQLite file, the
transcript store, the model's requests or the logs, even when the tool echoes it back
or raises with it."""

from __future__ import annotations

import json
import secrets as random_secrets
from pathlib import Path
from typing import Any

import pytest

from durable_agent import AgentClient
from durable_agent.activities.transcript_store import open_transcript_store
from durable_agent.messages import ToolMessage
from durable_agent.ports import free_port
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.tools import ToolContext, ToolRegistry, tool
from durable_agent.worker import build_worker, start_dev_server
from tests.support.agent_harness import LOCAL_DEVELOPMENT, cli_json, spec_for

CANARY = f"canary-{random_secrets.token_hex(12)}"
registry = ToolRegistry()
received: list[tuple[str, str]] = []
raised_once: list[bool] = []


@tool(registry=registry, bind={"token": "api_token"}, max_attempts=2, initial_retry_seconds=0.1)
def call_api(path: str, token: str, ctx: ToolContext) -> str:
    """Call the internal API."""
    received.append((path, token))
    if not raised_once:
        raised_once.append(True)
        raise RuntimeError(f"401 for token {token}")  # an error that quotes the secret
    return f"GET {path} with {token}: ok"  # a result that echoes it


def test_bad_references_are_refused_at_the_spec() -> None:
    provider: Any = type("P", (), {"base_url": "http://127.0.0.1:9/v1"})()
    with pytest.raises(ValueError, match="context: secret 'OTHER' is not listed in secrets"):
        spec_for(provider, ["call_api"], context={"api_token": "{{secret:OTHER}}"})
    with pytest.raises(ValueError, match="is not a secret name"):
        spec_for(provider, ["call_api"], secrets=["no-dashes"])


async def test_a_canary_secret_appears_nowhere_but_in_the_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CANARY_TOKEN", CANARY)
    env = await start_dev_server(tmp_path / "server", free_port(), free_port())
    store_path = tmp_path / "store.sqlite"
    script = [
        assistant_calls(
            ("call_api", {"path": "/v1/me?key={{secret:CANARY_TOKEN}}"}),
            ("call_api", {"path": "/v1/leak?key={{secret:HOME}}"}),  # not the session's
        ),
        assistant_text("done"),
    ]
    try:
        with ScriptedProvider(script) as provider:
            spec = spec_for(
                provider,
                ["call_api"],
                secrets=["CANARY_TOKEN"],
                context={"api_token": "Bearer {{secret:CANARY_TOKEN}}"},
            )
            store = open_transcript_store(f"sqlite:///{store_path}")
            async with build_worker(
                env.client,
                capabilities=LOCAL_DEVELOPMENT,
                task_queue="secrets",
                registry=registry,
                transcripts=store,
            ):
                agents = AgentClient(env.client, task_queue="secrets")
                session = await agents.start(spec, "call the API")
                result = await agents.result(session)
                messages = await agents.messages(session)
                shown = await cli_json(env, "workflow", "show", "--workflow-id", session)
    finally:
        await env.shutdown()
    # the tool got the real value, in its argument and its bound parameter
    assert received == [(f"/v1/me?key={CANARY}", f"Bearer {CANARY}")] * 2
    assert result.status == "done"
    me, leak = [m for m in messages if isinstance(m, ToolMessage)]
    assert (
        me.content
        == "GET /v1/me?key={{secret:CANARY_TOKEN}} with Bearer {{secret:CANARY_TOKEN}}: ok"
    )
    assert leak.is_error and "secret 'HOME' is not among the session's secrets" in leak.content
    # and nothing else ever saw it
    places = {
        "workflow history": json.dumps(shown),
        "model requests": json.dumps([r.body for r in provider.requests]),
        "query answers": json.dumps([m.model_dump(mode="json") for m in messages]),
        "logs": "".join(capfd.readouterr()),
    }
    for name, text in places.items():
        assert CANARY not in text, f"the secret leaked into the {name}"
        if name != "logs":
            assert "{{secret:CANARY_TOKEN}}" in text, f"{name}: the reference should be there"
    assert "401 for token Bearer {{secret:CANARY_TOKEN}}" in places["workflow history"]
    for path in [*(tmp_path / "server").rglob("*"), store_path]:
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), f"the secret is in {path}"
