"""With codec keys on, no log holds what a user or a model wrote. A canary goes into every
place they can put text: the message, a file's URL path, its query and its file name, a
tool's arguments and result, a tool's exception (with its traceback), a tool name the
model invents, the provider's error, a refused decision, a denial's reason, a start the
worker refuses at admission, and, through the gateway, a message, a request's path and
query, and payloads the codec endpoint decodes and encodes. It is in no line the worker
process or the gateway process (``durable-agent serve``, the codec endpoint's server)
writes, in any encoding, while the lines still say what happened, by kind, size and
origin. A log line keeps only the fields on one allowlist: a field added later is
withheld without anyone naming it."""

from __future__ import annotations

import ast
import asyncio
import base64
import logging
import os
import secrets as random_secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf.json_format import MessageToDict
from temporalio.api.common.v1 import Memo, Payload, Payloads, WorkflowType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest
from temporalio.client import Client

from durable_agent import AgentClient, SessionFailedError
from durable_agent._observability.logs import digest_of, withhold_text
from durable_agent._payloads.encryption import CodecKeys
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._wire.messages import AssistantMessage, file_part_from_url, user_message
from durable_agent.temporal import start_dev_server
from durable_agent.temporal._local import free_port
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text, error_reply
from durable_agent.testing._scripted_provider import RecordedRequest, Reply
from tests.conftest import started_on_free_port
from tests.support.agent_harness import spec_for, wait_for
from tests.support.file_origin import FileOrigin
from tests.trust.test_encryption import encodings

ROOT = Path(__file__).parents[2]
CANARY = f"log-canary-{random_secrets.token_hex(8)}"
INVENTED = f"invented_{CANARY.replace('-', '_')}"  # a tool name the model makes up
OPS = "ops-token-0123456789abcdefgh"


def model(request: RecordedRequest) -> AssistantMessage | Reply:
    """Calls every tool (and one it invents) for the worker's session, fails on the
    tools' results with the canary in the provider's error, answers anything else."""
    messages = request.body["messages"]
    if any(m["role"] == "tool" for m in messages):
        return error_reply(400, f"the provider cannot take {CANARY}")
    if "say" in str(messages[-1].get("content")):
        return assistant_calls(
            ("echo", {"text": CANARY}),
            ("explode", {"name": CANARY}),
            (INVENTED, {"what": CANARY}),
            ("guarded", {"text": CANARY}),
        )
    return assistant_text("noted")


async def test_a_worker_with_codec_keys_logs_no_user_text(tmp_path: Path) -> None:
    keys_text = CodecKeys.generate("k1")
    keys = CodecKeys.parse(keys_text)
    env = await start_dev_server(tmp_path / "server", free_port(), free_port(), codec_keys=keys)
    address = str(env.client.service_client.config.target_host)
    worker_log, gateway_log = tmp_path / "worker.log", tmp_path / "gateway.log"
    file_path = f"/public/{CANARY}/statement.pdf"
    try:
        with (
            FileOrigin() as origin,
            ScriptedProvider(responder=model) as provider,
            worker_log.open("w") as log_file,
        ):
            capabilities = tmp_path / "capabilities.toml"
            capabilities.write_text(
                f'file_origins = ["{origin.url}/public/"]\n'
                f'[models.scripted]\nbase_url = "{provider.base_url}"\napi_key_env = ""\n'
            )
            command = [
                *(sys.executable, "-m", "durable_agent._cli.main", "worker", "--address", address),
                *("--task-queue", "canary", "--tools", "tests.support.canary_tools"),
                *("--capabilities", str(capabilities), "--data-dir", str(tmp_path / "data")),
                *("--log-level", "debug"),
            ]
            worker = await asyncio.create_subprocess_exec(
                *command,
                cwd=ROOT,
                env={**os.environ, "DURABLE_AGENT_CODEC_KEYS": keys_text},
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
            try:
                # on a loaded machine the worker may take longer to start than a read waits
                await wait_for(lambda: ready(worker, worker_log), timeout=120)
                agents = AgentClient(env.client, task_queue="canary")
                tools = ["echo", "explode", "guarded"]
                spec = spec_for(provider, tools, session={}, max_attempts=1)
                spec = spec.model_copy(
                    update={"model": spec.model.model_copy(update={"endpoint": "scripted"})}
                )
                spec_file = tmp_path / "spec.json"
                spec_file.write_text(spec.model_dump_json())
                url = f"{origin.url}{file_path}?account={CANARY}"
                message = user_message(
                    f"say {CANARY}", file_part_from_url(url, filename=f"{CANARY}.pdf")
                )
                session = agents.session(await agents.start(spec, message))
                asked = await wait_for(lambda: pending(session), timeout=120)
                await session.deny(asked, by="ana", reason=f"not now, {CANARY}")
                await env.client.get_workflow_handle(session.id).signal(
                    "approve", {"approval_id": f"no-such-{CANARY}", "by": "ana"}
                )
                await session.wait(after=0, timeout=120)
                messages = await session.messages()
                rejections = (await session.status()).rejected_signals
                # starts the worker refuses: the reasons quote the tool and the URL given
                unknown = spec.model_validate(
                    {**spec.model_dump(mode="json"), "tools": [*tools, INVENTED]}
                )
                turned_away = agents.session(await agents.start(unknown, "hi"))
                with pytest.raises(SessionFailedError) as refusal:
                    await asyncio.wait_for(turned_away.result(), 60)
                inline = ProviderEndpoint(base_url=f"{provider.base_url}/{CANARY}")
                elsewhere = spec.model_copy(
                    update={"model": spec.model.model_copy(update={"endpoint": inline})}
                )
                not_admitted = agents.session(await agents.start(elsewhere, "hi"))
                with pytest.raises(SessionFailedError) as admission:
                    await asyncio.wait_for(not_admitted.result(), 60)
                started = (await env.client.get_workflow_handle(session.id).fetch_history()).events
                sent = MessageToDict(
                    Payloads(
                        payloads=started[
                            0
                        ].workflow_execution_started_event_attributes.input.payloads
                    )
                )["payloads"]
                forged = await forged_title(env.client)
                said = await through_the_gateway(
                    address, spec_file, keys_text, gateway_log, sent, forged
                )
                await session.end(by="ops")
                await asyncio.wait_for(session.result_if_closed(), 60)
            finally:
                worker.terminate()
                await asyncio.wait_for(worker.wait(), 30)
    finally:
        await env.shutdown()
    written = worker_log.read_bytes()
    served = gateway_log.read_bytes()
    # it all happened: the origin was asked for the path, the tools ran, the person
    # denied, the signal and the start were refused, the gateway served and decoded
    assert [a.path for a in origin.asked] == [f"{file_path}?account={CANARY}"]
    tool_results = {m.tool_name: str(m.content) for m in messages if m.role == "tool"}
    assert CANARY in tool_results["echo"] and CANARY in tool_results["guarded"], tool_results
    assert CANARY in tool_results["explode"] and INVENTED in tool_results, tool_results
    assert any(CANARY in r for r in rejections), rejections
    assert INVENTED in str(refusal.value) and CANARY in str(admission.value), admission.value
    assert said["decoded"] and said["status"] == 404 and said["bad_after"] == 400
    # and the lines say so, by kind, size and origin
    assert b"file left out of the request" in written, written[-3000:]
    assert f"url={origin.url}".encode() in written or f'"{origin.url}"'.encode() in written
    assert b"tool raised" in written and b"RuntimeError: <" in written, written[-3000:]
    assert b"Completing activity as failed" in written
    assert b"signal changed nothing" in written
    assert b"session refused at admission" in written
    assert b"durable-agent gateway on" in served and b"memo not readable" in served, served
    for name, coded in encodings(CANARY).items():
        assert coded not in written, f"the canary is in the worker's log ({name})"
        assert coded not in served, f"the canary is in the gateway's log ({name})"


async def pending(session: Any) -> str | None:
    status = await session.status()
    return status.pending_approvals[0].approval_id if status.pending_approvals else None


async def forged_title(client: Client) -> str:
    """A session someone started by hand, its title memo claiming a key whose id is the
    canary: the gateway cannot read it, and its error names the key id."""
    forged = f"forged-{random_secrets.token_hex(4)}"
    title = Payload(
        metadata={"encoding": b"binary/encrypted", "encryption-key-id": CANARY.encode()},
        data=b"\0" * 40,
    )
    await client.workflow_service.start_workflow_execution(
        StartWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_id=forged,
            workflow_type=WorkflowType(name="AgentWorkflow"),
            task_queue=TaskQueue(name="no-worker-here"),
            memo=Memo(fields={"title": title}),
            request_id=random_secrets.token_hex(8),
        )
    )
    return forged


async def through_the_gateway(
    address: str, spec_file: Path, keys: str, log_path: Path, sent: list[Any], forged: str
) -> dict[str, Any]:
    """``durable-agent serve`` with the codec keys and an admin, its output kept in
    ``log_path``: a session started with the canary, requests whose path and query hold
    it, a listing that meets a title it cannot read (``forged``), and the codec endpoint
    decoding the worker's session's start and encoding the canary."""
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "DURABLE_AGENT_GATEWAY_TOKENS": f"ops={OPS}",
        "DURABLE_AGENT_GATEWAY_ADMINS": "token:ops",
        "DURABLE_AGENT_CODEC_KEYS": keys,
    }
    env.pop("OPENAI_API_KEY", None)
    command = [sys.executable, "-m", "durable_agent._cli.main", "serve", "--task-queue", "canary"]
    command += ["--spec", str(spec_file), "--codec-origin", "http://ui.example:8233"]
    with log_path.open("w") as log_file:
        process, port = started_on_free_port(
            lambda port: subprocess.Popen(
                [*command, "--port", str(port)],
                cwd=ROOT,
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        )
        try:
            headers = {"Authorization": f"Bearer {OPS}"}
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60
            ) as http:
                started = await http.post("/api/sessions", json={"message": f"hi {CANARY}"})
                assert started.status_code == 201, started.text
                sid = started.json()["session_id"]

                async def answered() -> bool:
                    status = (await http.get(f"/api/sessions/{sid}/status")).json()
                    return bool(status.get("phase") == "idle" or status.get("idle"))

                await wait_for(answered, timeout=120)

                async def listed() -> bool:
                    found = (await http.get("/api/sessions?limit=200")).json()
                    return forged in str(found)

                await wait_for(listed, timeout=60)
                missing = await http.get(f"/api/sessions/{CANARY}/status?q={CANARY}")
                bad_after = await http.get(f"/api/sessions/{sid}/events?after={CANARY}")
                decoded = await http.post("/codec/decode", json={"payloads": sent})
                plain = base64.b64encode(CANARY.encode()).decode()
                encode = {"payloads": [{"metadata": {}, "data": plain}]}
                encoded = await http.post("/codec/encode", json=encode)
                json_type = {"Content-Type": "application/json"}
                broken = await http.post(
                    "/codec/decode", content=f"{{{CANARY}".encode(), headers=json_type
                )
                await http.post(f"/api/sessions/{sid}/end", json={"by": "ops"})
        finally:
            process.terminate()
            process.wait(10)
    texts = [base64.b64decode(p.get("data", "")) for p in decoded.json()["payloads"]]
    assert encoded.status_code == 200 and plain not in encoded.text
    assert broken.status_code == 400
    return {
        "decoded": any(CANARY.encode() in t for t in texts),
        "status": missing.status_code,
        "bad_after": bad_after.status_code,
    }


async def ready(worker: asyncio.subprocess.Process, log_path: Path) -> bool:
    said = log_path.read_text(errors="replace")
    if worker.returncode is not None:
        raise AssertionError(f"the worker exited before it was ready: {said[-2000:]}")
    return "worker ready" in said


def test_a_line_keeps_only_allowed_fields() -> None:
    """Ids, counts and kinds stay; a session id (a client's conversation id can be part
    of it) becomes a digest; a URL keeps its scheme and host; an error keeps its
    exception type; a count field given text, a tool name and a field no one has named
    yet are withheld."""
    chosen = f"conversation-token~ana~{CANARY}"
    line = withhold_text(
        None,
        "warning",
        {
            "event": "tool raised",
            "session_id": chosen,
            "run_id": "r-1",
            "turn": 3,
            "error": f"ValueError: {CANARY}",
            "tool": CANARY,
            "url": f"https://files.example:8443/public/{CANARY}.pdf?k={CANARY}",
            "chars": CANARY,
            "added_later": CANARY,
            "added_later_too": [CANARY],
        },
    )
    assert line == {
        "event": "tool raised",
        "session_id": digest_of(chosen),
        "run_id": "r-1",
        "turn": 3,
        "error": f"ValueError: <{len(CANARY) + 12} characters withheld>",
        "tool": f"<{len(CANARY)} characters withheld>",
        "url": "https://files.example:8443",
        "chars": f"<{len(CANARY)} characters withheld>",
        "added_later": f"<{len(CANARY)} characters withheld>",
        "added_later_too": "<list of 1 withheld>",
    }


def test_a_library_line_keeps_its_words_not_its_arguments() -> None:
    record = logging.LogRecord(
        "lib", logging.WARNING, "f", 1, "cannot read %s (%d)", (CANARY, 2), None
    )
    line = withhold_text(
        None, "warning", {"event": record.getMessage(), "_record": record, "extra": CANARY}
    )
    assert line["event"] == "cannot read <withheld> (%d)"
    assert line["extra"] == f"<{len(CANARY)} characters withheld>"
    record = logging.LogRecord("lib", logging.WARNING, "f", 1, ValueError(CANARY), (), None)
    line = withhold_text(None, "warning", {"event": record.getMessage(), "_record": record})
    assert line["event"] == f"<{len(CANARY)} characters withheld>"


LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def test_every_line_we_write_names_its_event_in_constant_words() -> None:
    """A line's event (its first argument) is our own constant text: never formatted.
    Our structlog lines are given nothing to format into it either (structlog would);
    the workflow's lines may be, as a library's are, and their arguments are withheld."""
    seen = 0
    for folder in ("durable_agent", "activities", "workflows"):
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_text())
            # the workflow's logging functions pass their callers' text on: the callers
            # are checked, not they
            passing = {
                line
                for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef) and node.name in ("session_log", "warn")
                for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
            }
            for node in ast.walk(tree):
                found = _event_of(node) if isinstance(node, ast.Call) else None
                if found is None or node.lineno in passing:
                    continue
                event, formats = found
                seen += 1
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                assert isinstance(event, ast.Constant) and isinstance(event.value, str), where
                assert formats or len(node.args) == 1, f"{where}: an argument to format"
    assert seen > 30


def _event_of(call: ast.Call) -> tuple[ast.expr, bool] | None:
    """The event of a log call, and whether the call formats arguments into it as the
    standard library does: ``log.info(...)``, ``bound.warning(...)``,
    ``_log_for(call).info(...)`` (structlog), ``workflow.logger.warning(...)``,
    ``session_log(...)`` and ``warn(...)`` (the standard library's)."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in {"session_log", "warn"}:
        at = 2 if func.id == "session_log" else 1
        return (call.args[at], True) if len(call.args) > at else None
    if not isinstance(func, ast.Attribute) or func.attr not in LEVELS:
        return None
    owner = func.value
    ours = isinstance(owner, ast.Name) and owner.id in {"log", "bound"}
    ours = ours or (
        isinstance(owner, ast.Call)
        and isinstance(owner.func, ast.Name)
        and owner.func.id == "_log_for"
    )
    standard = isinstance(owner, ast.Attribute) and owner.attr == "logger"
    if not (ours or standard) or not call.args:
        return None
    if func.attr == "log":
        return (call.args[1], True) if len(call.args) > 1 else None
    return call.args[0], standard
