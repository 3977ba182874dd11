"""Encryption at rest: with codec keys, a canary sent in a message and returned by a tool
is in no byte of Temporal's database or the transcript store, yet every reader with the
keys sees it; keys rotate; histories replay with the codec on and off; and the Temporal
UI decodes through the gateway's codec endpoint over real HTTP."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets as random_secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from durable_agent._activities.transcript_store import open_transcript_store
from durable_agent._workflows import AgentWorkflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from durable_agent import AgentClient
from durable_agent._payloads.encryption import (
    CodecKeyError,
    CodecKeys,
    EncryptionCodec,
    with_encryption,
)
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.temporal import DurableAgentPlugin, build_worker, start_dev_server
from durable_agent.temporal._local import free_port
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text, error_reply
from tests.support.agent_harness import LOCAL_DEVELOPMENT, cli_json, spec_for
from tests.support.docs_page import run_page_block
from tests.support.gateway_harness import gateway

CANARY = f"at-rest-canary-{random_secrets.token_hex(10)}"
OLD, NEW = CodecKeys.generate("k1"), CodecKeys.generate("k2")
registry = Registry()


@tool(registry=registry)
def lookup(name: str) -> str:
    """Look a name up."""
    return f"record of {name}: {CANARY}"


def key_ids(history: dict[str, object]) -> set[str]:
    """The key ids on the encrypted payloads of a raw history (read without keys)."""
    text = json.dumps(history)
    return {
        base64.b64decode(found).decode()
        for found in __import__("re").findall(r'"encryption-key-id": "([A-Za-z0-9+/=]+)"', text)
    }


async def test_a_canary_is_in_no_byte_of_the_server_or_the_store_and_keys_rotate(
    tmp_path: Path,
) -> None:
    old_keys, both = CodecKeys.parse(OLD), CodecKeys.parse(f"{NEW},{OLD}")
    server = tmp_path / "server"
    env = await start_dev_server(server, free_port(), free_port(), codec_keys=old_keys)
    store_path = tmp_path / "store.sqlite"
    script = [
        assistant_calls(("lookup", {"name": CANARY})),
        assistant_text(f"found {CANARY}"),
        assistant_text("and again"),
    ]
    try:
        with ScriptedProvider(script) as provider:
            spec = spec_for(provider, ["lookup"], session={})
            store = open_transcript_store(f"sqlite:///{store_path}", old_keys)
            async with build_worker(
                env.client,
                task_queue="enc",
                registry=registry,
                transcripts=store,
                capabilities=LOCAL_DEVELOPMENT,
                preload_tokenizers=False,
            ):
                agents = AgentClient(env.client, task_queue="enc")
                session = await agents.start(spec, f"who is {CANARY}?")
                await agents.session(session).wait()
            # the keys rotate: a new key encrypts, the old one still decrypts
            rotated = await Client.connect(
                env.client.service_client.config.target_host,
                data_converter=with_encryption(pydantic_data_converter, both),
            )
            store = open_transcript_store(f"sqlite:///{store_path}", both)
            async with build_worker(
                rotated,
                task_queue="enc",
                registry=registry,
                transcripts=store,
                capabilities=LOCAL_DEVELOPMENT,
                preload_tokenizers=False,
            ):
                agents = AgentClient(rotated, task_queue="enc")
                await agents.session(session).send("once more")
                await agents.session(session).wait(after=5)
                messages = [
                    m.model_dump(mode="json") for m in await agents.session(session).messages()
                ]
                events = []
                async for event in agents.session(session).follow():
                    events.append(event.model_dump_json())
                    if event.type == "idle":
                        break
                # the durable-agent CLI reads it with the keys in its environment
                address = str(env.client.service_client.config.target_host)
                with_keys = await asyncio.to_thread(
                    subprocess.run,
                    [
                        sys.executable,
                        "-m",
                        "durable_agent._cli.main",
                        "history",
                        session,
                        "--task-queue",
                        "enc",
                    ],
                    env={
                        **os.environ,
                        "TEMPORAL_ADDRESS": address,
                        "DURABLE_AGENT_CODEC_KEYS": f"{NEW},{OLD}",
                    },
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            shown = await cli_json(env, "workflow", "show", "--workflow-id", session)
    finally:
        await env.shutdown()
    # readers with the keys see everything
    assert CANARY in json.dumps(messages) and any(CANARY in e for e in events)
    assert with_keys.returncode == 0, with_keys.stderr
    assert CANARY in with_keys.stdout
    assert messages[-1]["content"] == "and again"
    # the server and the store hold only ciphertext, under both key ids
    assert CANARY not in json.dumps(shown)
    assert key_ids(shown) == {"k1", "k2"}
    files = [p for p in server.rglob("*") if p.is_file()] + [store_path]
    assert len(files) >= 2
    for path in files:
        data = path.read_bytes()
        assert CANARY.encode() not in data, f"the canary is in {path}"
        assert base64.b64encode(CANARY.encode())[:20] not in data, f"base64 of it in {path}"
    # a reader without the old key cannot open the old payloads
    only_new = EncryptionCodec(CodecKeys.parse(NEW))
    old_payload = CodecKeys.parse(OLD).seal(b"x")
    with pytest.raises(CodecKeyError, match="key 'k1', which is not among"):
        only_new.keys.open(*old_payload)


async def test_histories_replay_with_the_codec_on_and_off(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """An encrypted session's history replays with the keys; the recorded plaintext
    histories replay through the codec too (payloads without encryption pass)."""
    keys = CodecKeys.parse(NEW)
    converter = with_encryption(pydantic_data_converter, keys)
    encrypted = await Client.connect(
        temporal_env.client.service_client.config.target_host, data_converter=converter
    )
    with ScriptedProvider([assistant_calls(("lookup", {"name": "x"})), assistant_text("ok")]) as p:
        async with build_worker(
            encrypted,
            task_queue=task_queue,
            registry=registry,
            capabilities=LOCAL_DEVELOPMENT,
            preload_tokenizers=False,
        ):
            agents = AgentClient(encrypted, task_queue=task_queue)
            session = await agents.start(spec_for(p, ["lookup"]), "look x up")
            assert (await agents.session(session).result()).status == "done"
    history = await temporal_env.client.get_workflow_handle(session).fetch_history()
    with_keys = Replayer(workflows=[AgentWorkflow], data_converter=converter)
    assert (
        await with_keys.replay_workflow(history, raise_on_replay_failure=False)
    ).replay_failure is None
    without = Replayer(workflows=[AgentWorkflow], data_converter=pydantic_data_converter)
    failed = await without.replay_workflow(history, raise_on_replay_failure=False)
    assert failed.replay_failure is not None  # ciphertext is not a session's input
    run_page_block("## A new tool kind")  # one history holds the manual's kind's tools
    plugin = DurableAgentPlugin(preload_tokenizers=False)  # passes the kinds' registry in
    with_keys = Replayer(workflows=[], plugins=[plugin], data_converter=converter)
    recorded = Path(__file__).parent.parent / "histories"
    for path in sorted(recorded.glob("*.json")):
        from temporalio.client import WorkflowHistory

        plain = WorkflowHistory.from_json(path.stem, path.read_text())
        result = await with_keys.replay_workflow(plain, raise_on_replay_failure=False)
        assert result.replay_failure is None, f"{path.stem}: {result.replay_failure}"


UI_TOKEN = "ui-token-of-16-chars"


async def test_the_temporal_ui_decodes_through_the_gateways_codec_endpoint(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporal's remote codec contract: POST JSON payloads (base64 metadata and data)
    with X-Namespace, from the UI's origin (CORS preflight first), with the token of a
    gateway user (an admin here: the payload belongs to no session)."""
    monkeypatch.setenv("DURABLE_AGENT_CODEC_KEYS", NEW)
    monkeypatch.setenv("DURABLE_AGENT_GATEWAY_TOKENS", f"temporal-ui={UI_TOKEN}")
    monkeypatch.setenv("DURABLE_AGENT_GATEWAY_ADMINS", "token:temporal-ui")
    ui = "http://localhost:8233"
    codec = EncryptionCodec(CodecKeys.parse(NEW))
    plain = pydantic_data_converter.payload_converter.to_payloads([{"said": CANARY}])
    sealed = await codec.encode(plain)
    from google.protobuf.json_format import MessageToDict
    from temporalio.api.common.v1 import Payloads

    body = {"payloads": MessageToDict(Payloads(payloads=sealed))["payloads"]}
    address = str(temporal_env.client.service_client.config.target_host)
    with gateway(address, task_queue, None, "--codec-origin", ui) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            headers = {"Origin": ui, "X-Namespace": "default"}
            preflight = await http.options(
                "/codec/decode",
                headers={
                    **headers,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type,x-namespace",
                },
            )
            decoded = await http.post(
                "/codec/decode",
                json=body,
                headers={**headers, "Authorization": f"Bearer {UI_TOKEN}"},
            )
            no_token = await http.post("/codec/decode", json=body, headers=headers)
            elsewhere = await http.post(
                "/codec/decode",
                json=body,
                headers={"Origin": "https://evil.example", "Authorization": f"Bearer {UI_TOKEN}"},
            )
            encoded = await http.post(
                "/codec/encode",
                json={"payloads": MessageToDict(Payloads(payloads=plain))["payloads"]},
                headers={**headers, "Authorization": f"Bearer {UI_TOKEN}"},
            )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == ui
    assert "x-namespace" in preflight.headers["access-control-allow-headers"].lower()
    assert decoded.status_code == 200, decoded.text
    assert decoded.headers["access-control-allow-origin"] == ui
    [payload] = decoded.json()["payloads"]
    assert json.loads(base64.b64decode(payload["data"])) == {"said": CANARY}
    assert no_token.status_code == 401 and elsewhere.status_code == 403
    [sealed_again] = encoded.json()["payloads"]
    assert base64.b64decode(sealed_again["metadata"]["encoding"]) == b"binary/encrypted"
    assert CANARY not in json.dumps(encoded.json())
    await asyncio.sleep(0)


FAILURE_CANARY = f"failure-canary-{random_secrets.token_hex(10)}"
failing = Registry()


@tool(registry=failing, max_attempts=1)
def explode(name: str) -> str:
    """A tool that fails, naming what it was given."""
    raise RuntimeError(f"cannot explode {name}")


def encodings(canary: str) -> dict[str, bytes]:
    """``canary`` in each encoding a byte of storage could hold it in: as it is, in
    base64 at each of the three alignments, in hex, in UTF-16."""
    found = {"plain": canary.encode(), "hex": canary.encode().hex().encode()}
    for shift in range(3):
        coded = base64.b64encode(b"\0" * shift + canary.encode())
        found[f"base64+{shift}"] = coded[4 : len(coded) - 4]  # the part no neighbour changes
    found["utf-16-le"], found["utf-16-be"] = canary.encode("utf-16-le"), canary.encode("utf-16-be")
    return found


async def test_failures_are_encrypted_too(tmp_path: Path) -> None:
    """With the codec on, what failures say is encrypted as well: a tool's exception
    text (the name the user gave it), the provider's error words, and a refused start's
    explanation that quotes the input. The canary is in no byte of Temporal's database or
    the transcript store, in any encoding, and readers with the keys still see each."""
    keys = CodecKeys.parse(NEW)
    server = tmp_path / "server"
    env = await start_dev_server(server, free_port(), free_port(), codec_keys=keys)
    store_path = tmp_path / "store.sqlite"
    script = [
        assistant_calls(("explode", {"name": FAILURE_CANARY})),
        error_reply(400, f"the provider cannot take {FAILURE_CANARY}"),
    ]
    try:
        with ScriptedProvider(script) as provider:
            spec = spec_for(provider, ["explode"], session={}, max_attempts=1)
            store = open_transcript_store(f"sqlite:///{store_path}", keys)
            async with build_worker(
                env.client,
                task_queue="enc",
                registry=failing,
                transcripts=store,
                capabilities=LOCAL_DEVELOPMENT,
                preload_tokenizers=False,
            ):
                agents = AgentClient(env.client, task_queue="enc")
                session = await agents.start(spec, "explode it")
                outcome = await agents.session(session).wait(after=0, timeout=60)
                messages = await agents.session(session).messages()
                status = await agents.session(session).status()
                bad = spec.model_dump(mode="json")
                bad["tools"] = [{"name": "explode", FAILURE_CANARY: True}]
                refused = await env.client.start_workflow(
                    "AgentWorkflow",
                    {"spec": bad, "message": "hi"},
                    id=f"refused-{random_secrets.token_hex(4)}",
                    task_queue="enc",
                )
                with pytest.raises(WorkflowFailureError) as failed:
                    await asyncio.wait_for(refused.result(), 60)
    finally:
        await env.shutdown()
    # readers with the keys see what happened
    [result] = [m for m in messages if m.role == "tool"]
    assert result.is_error and FAILURE_CANARY in result.content
    assert outcome is not None and FAILURE_CANARY in (status.last_error or "")
    assert FAILURE_CANARY in str(failed.value.cause)
    # and nothing is readable at rest
    files = [p for p in server.rglob("*") if p.is_file()] + [store_path]
    for path in files:
        data = path.read_bytes()
        for name, coded in encodings(FAILURE_CANARY).items():
            assert coded not in data, f"the canary is in {path}, {name}"
