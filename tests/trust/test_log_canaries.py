"""With codec keys on, the worker's log holds no user text: a canary the user typed,
that a tool's exception quotes (with its traceback), that a tool returns, that the
provider's error repeats and that a refused decision quotes, is in no line the worker
process writes, in any encoding; the lines still say what happened, by kind and size."""

from __future__ import annotations

import asyncio
import os
import secrets as random_secrets
import subprocess
import sys
from pathlib import Path

from durable_agent import AgentClient
from durable_agent._observability._logs import withhold_text
from durable_agent._payloads._encryption import CodecKeys
from durable_agent.temporal import start_dev_server
from durable_agent.temporal._ports import free_port
from durable_agent.testing import ScriptedProvider, assistant_calls, error_reply
from tests.support.agent_harness import spec_for, wait_for
from tests.trust.test_encryption import encodings

ROOT = Path(__file__).parents[2]
CANARY = f"log-canary-{random_secrets.token_hex(8)}"


async def test_a_worker_with_codec_keys_logs_no_user_text(tmp_path: Path) -> None:
    keys_text = CodecKeys.generate("k1")
    keys = CodecKeys.parse(keys_text)
    env = await start_dev_server(tmp_path / "server", free_port(), free_port(), codec_keys=keys)
    address = str(env.client.service_client.config.target_host)
    script = [
        assistant_calls(("echo", {"text": CANARY}), ("explode", {"name": CANARY})),
        error_reply(400, f"the provider cannot take {CANARY}"),
    ]
    log_path = tmp_path / "worker.log"
    try:
        with ScriptedProvider(script) as provider, log_path.open("w") as log_file:
            capabilities = tmp_path / "capabilities.toml"
            capabilities.write_text(
                f'[models.scripted]\nbase_url = "{provider.base_url}"\napi_key_env = ""\n'
            )
            command = [
                *(sys.executable, "-m", "durable_agent._cli", "worker", "--address", address),
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
                await wait_for(lambda: ready(worker, log_path), timeout=120)
                agents = AgentClient(env.client, task_queue="canary")
                spec = spec_for(provider, ["echo", "explode"], session={}, max_attempts=1)
                model = spec.model.model_copy(update={"endpoint": "scripted"})
                spec = spec.model_copy(update={"model": model})
                session = agents.session(await agents.start(spec, f"say {CANARY}"))
                refused = await env.client.get_workflow_handle(session.id).signal(
                    "approve", {"approval_id": f"no-such-{CANARY}", "by": "ana"}
                )
                await session.wait(after=0, timeout=120)
                messages = await session.messages()
                rejections = (await session.status()).rejected_signals
                await session.end(by="ops")
                await asyncio.wait_for(session.result_if_closed(), 60)
            finally:
                worker.terminate()
                await asyncio.wait_for(worker.wait(), 30)
    finally:
        await env.shutdown()
    assert refused is None and any(CANARY in r for r in rejections)
    written = log_path.read_bytes()
    # it happened, and the lines say so
    assert any(CANARY in str(m.content) for m in messages if m.role == "tool"), (
        messages,
        written[-4000:],
    )
    assert b"tool raised" in written and b"RuntimeError: <" in written, written[-3000:]
    assert b"Completing activity as failed" in written
    assert b"signal changed nothing" in written
    for name, coded in encodings(CANARY).items():
        assert coded not in written, f"the canary is in the worker's log ({name})"


async def ready(worker: asyncio.subprocess.Process, log_path: Path) -> bool:
    said = log_path.read_text(errors="replace")
    if worker.returncode is not None:
        raise AssertionError(f"the worker exited before it was ready: {said[-2000:]}")
    return "worker ready" in said


def test_withholding_keeps_kinds_sizes_and_ids() -> None:
    line = withhold_text(
        None, "warning", {"event": "tool raised", "error": f"ValueError: {CANARY}", "tool": "t"}
    )
    assert line == {
        "event": "tool raised",
        "error": f"ValueError: <{len(CANARY) + 12} characters withheld>",
        "tool": "t",
    }
