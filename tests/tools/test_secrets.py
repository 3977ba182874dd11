"""Secrets never enter history: a canary value, referenced as ``{{secret:NAME}}`` in a
tool's arguments and bound context, reaches the tool and appears in none of the
workflow history (``temporal workflow show``), the dev server's SQLite file, the
transcript store, the model's requests or the logs, even when the tool echoes it back
or raises with it."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets as random_secrets
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from durable_agent._activities.transcript_store import open_transcript_store
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.tools import ToolContext
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.temporal import build_worker, start_dev_server
from durable_agent.temporal._local import free_port
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text, error_reply
from tests.support.agent_harness import LOCAL_DEVELOPMENT, cli_json, running_worker, spec_for

#: A value whose URL-quoted, JSON-escaped and base64 forms all differ from it.
CANARY = f'canary-{random_secrets.token_hex(12)}/+"'


def disguised(value: str) -> dict[str, str]:
    """The forms the tool below echoes the value in, as the test computes them."""
    return {
        "url-quoted": quote(value, safe=""),
        "json-escaped": json.dumps(value)[1:-1],
        "base64": base64.b64encode(value.encode()).decode(),
    }


def decoded_base64(text: str) -> bytes:
    """Every run of base64 characters in ``text``, decoded at each alignment (what
    someone reading a leaked Basic header would do)."""
    out = b""
    for run in re.findall(r"[A-Za-z0-9+/_-]{8,}", text):
        for start in range(4):
            chunk = run[start:]
            chunk = chunk[: len(chunk) - len(chunk) % 4]
            with contextlib.suppress(ValueError):
                out += base64.b64decode(chunk.replace("-", "+").replace("_", "/")) + b"\n"
    return out


registry = Registry()
received: list[tuple[str, str]] = []
raised_once: list[bool] = []


@tool(registry=registry, bind={"token": "api_token"}, max_attempts=2, initial_retry_seconds=0.1)
def call_api(path: str, token: str, ctx: ToolContext) -> str:
    """Call the internal API."""
    received.append((path, token))
    if not raised_once:
        raised_once.append(True)
        raise RuntimeError(f"401 for token {token}")  # an error that quotes the secret
    basic = base64.b64encode(f"user:{token}".encode()).decode()
    # a result that echoes it, as it is and as links, JSON and Basic headers carry it
    return f"GET {path} with {token}: ok; link {quote(token, safe='')}; " + json.dumps(
        {"token": token, "basic": basic}
    )


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
                result = await agents.session(session).result()
                messages = await agents.session(session).messages()
                shown = await cli_json(env, "workflow", "show", "--workflow-id", session)
    finally:
        await env.shutdown()
    # the tool got the real value, in its argument and its bound parameter
    assert received == [(f"/v1/me?key={CANARY}", f"Bearer {CANARY}")] * 2
    assert result.status == "done"
    me, leak = [m for m in messages if isinstance(m, ToolMessage)]
    assert me.content.startswith(
        "GET /v1/me?key={{secret:CANARY_TOKEN}} with Bearer {{secret:CANARY_TOKEN}}: ok; "
        "link Bearer%20{{secret:CANARY_TOKEN}}; "
    ), me.content
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
        for form, encoded in disguised(CANARY).items():
            assert encoded not in text, f"the secret leaked, {form}, into the {name}"
        assert CANARY.encode() not in decoded_base64(text), f"base64 of it is in the {name}"
        if name != "logs":
            assert "{{secret:CANARY_TOKEN}}" in text, f"{name}: the reference should be there"
    assert "401 for token Bearer {{secret:CANARY_TOKEN}}" in places["workflow history"]
    for path in [*(tmp_path / "server").rglob("*"), store_path]:
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), f"the secret is in {path}"


async def test_a_provider_error_that_quotes_the_key_reaches_history_without_it(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Providers answer a bad key by quoting it (as it is, or base64 in a debug field):
    the error the session records names the header, never the value."""
    key = f"sk-{random_secrets.token_hex(16)}"
    monkeypatch.setenv("DURABLE_TEST_PROVIDER_KEY", key)
    quoted = (
        f"Incorrect API key provided: {key} (seen as {base64.b64encode(key.encode()).decode()})"
    )
    with ScriptedProvider([error_reply(401, quoted)]) as provider:
        spec = spec_for(provider)
        endpoint = spec.model.endpoint.model_copy(
            update={"api_key_env": "DURABLE_TEST_PROVIDER_KEY"}
        )
        spec = spec.model_copy(
            update={"model": spec.model.model_copy(update={"endpoint": endpoint})}
        )
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "hello")
            result = await agents.session(session).result()
            shown = json.dumps(
                await cli_json(temporal_env, "workflow", "show", "--workflow-id", session)
            )
    sent = {name.lower(): value for name, value in provider.requests[0].headers.items()}
    assert sent["authorization"] == f"Bearer {key}"  # it was sent
    assert result.status == "failed" and result.error is not None
    assert "Incorrect API key provided: [authorization value]" in result.error, result.error
    for text in (result.error, shown):
        assert key not in text and base64.b64encode(key.encode()).decode() not in text
