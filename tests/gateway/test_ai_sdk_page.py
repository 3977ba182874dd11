"""The AI SDK door as a web page uses it: the ``useChat`` page of
``examples/web_chat.py`` (React and ``@ai-sdk/react``, bundled by esbuild) in Debian's
Chromium, on the gateway with its door, against a worker in its own process. The page
sends a message and the reply streams; the worker is killed (SIGKILL) mid-reply and the
same reply ends on a fresh worker, shown once; the page is reloaded while a call waits
for a person and shows the chat's past messages from the door; the call approved there
runs once, a denied one does not. The order of the parts is read from the stream the browser got,
never from timing. And the example itself, run as a reader runs it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from playwright.async_api import Page, expect
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from examples.web_chat import bundle, web_chat_app
from tests.conftest import started_on_free_port
from tests.gateway.test_ai_sdk_door import registry, wiped
from tests.observability.test_live_events import paced
from tests.support.agent_harness import (
    KILL_HEARTBEAT_SECONDS,
    running_worker,
    spec_for,
    start_worker_process,
)
from tests.support.ai_sdk_client import need_ai_sdk
from tests.support.browser import chromium_page
from tests.support.docs_page import page_block

ROOT = Path(__file__).parents[2]
WEB_CHAT = ROOT / "docs" / "how-to" / "web-chat.md"
ANSWER = "a durable answer that outlives the worker it began on"


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` on a free port of 127.0.0.1 in this process: its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    for _ in range(600):  # a minute at most
        if server.started:
            break
        await asyncio.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await app.state.stopping()
        server.should_exit = True
        await task
        sock.close()


#: Keeps a copy of each stream the page reads from the door (the page's own fetch, teed),
#: so the test reads the order of the parts the browser got.
RECORD_STREAMS = """
window.__streams = [];
const pageFetch = window.fetch;
window.fetch = async (...args) => {
  const response = await pageFetch(...args);
  const url = String(args[0] && args[0].url ? args[0].url : args[0]);
  const isStream = url.includes("/api/ai-sdk/chat") && !url.endsWith("/messages");
  if (!isStream || !response.body) return response;
  const [kept, read] = response.body.tee();
  const record = { text: "" };
  window.__streams.push(record);
  (async () => {
    const reader = kept.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      record.text += value;
    }
  })();
  return new Response(read, { status: response.status, headers: response.headers });
};
"""


def stream_types(body: str) -> list[str]:
    """The chunk types of one UI message stream, in order (the notices left out)."""
    found = []
    for line in body.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            kind = json.loads(line[6:])["type"]
            if kind != "data-durable-agent":
                found.append(kind)
    return found


async def send(page: Page, text: str) -> None:
    await page.fill("input", text)
    await page.press("input", "Enter")


async def test_a_use_chat_page_streams_survives_a_worker_kill_and_approves_a_call(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    need_ai_sdk()
    script_file = bundle(tmp_path)
    ran = tmp_path / "wiped.txt"
    ran.touch()
    released = threading.Event()
    answer = paced(assistant_text(ANSWER), 0.01)
    held = dataclasses.replace(answer, hold=released, hold_after=len(answer.chunks) // 2)
    script = [
        held,  # the call on the worker about to be killed: it never ends there
        paced(assistant_text(ANSWER), 0.01),
        assistant_calls(("wipe_cache", {"name": "tiles"})),
        assistant_text("tiles cleared"),
        assistant_calls(("wipe_cache", {"name": "maps"})),
        assistant_text("maps left alone"),
    ]
    workers: list[subprocess.Popen[str]] = []
    with ScriptedProvider(script) as provider:
        rules = {"heartbeat_timeout_seconds": KILL_HEARTBEAT_SECONDS}
        spec = spec_for(provider, ["wipe_cache"], session=rules)
        agents = AgentClient(temporal_env.client, task_queue=task_queue)
        app = web_chat_app(agents, spec, script_file)
        workers.append(start_worker_process(temporal_env, task_queue, CLI_TOOLS_WIPED=str(ran)))
        try:
            async with serving(app) as base, chromium_page() as page:
                await page.add_init_script(RECORD_STREAMS)
                await page.goto(f"{base}/chat?chat=page-{task_queue}")
                await send(page, "tell me something durable")
                reply = page.locator(".message[data-role=assistant] .text").first
                await expect(reply).not_to_have_text("", timeout=60_000)  # it streams
                shown_before = await reply.inner_text()
                workers[0].kill()  # mid-reply
                workers[0].wait()
                workers.append(
                    start_worker_process(temporal_env, task_queue, CLI_TOOLS_WIPED=str(ran))
                )
                await expect(reply).to_have_text(ANSWER, timeout=90_000)
                await expect(page.locator("main")).to_have_attribute(
                    "data-status", "ready", timeout=30_000
                )
                first_texts = await page.locator(
                    ".message[data-role=assistant] .text"
                ).all_inner_texts()
                # a call a person approves in the page, after reloading it while it waits
                await send(page, "clear the tiles cache")
                approve = page.get_by_role("button", name="Approve")
                await expect(approve).to_have_count(1, timeout=60_000)
                await expect(page.locator("main")).to_have_attribute(
                    "data-status", "ready", timeout=30_000
                )
                before_reload = await page.evaluate("window.__streams.map(s => s.text)")
                await page.reload()
                await expect(approve).to_have_count(1, timeout=60_000)
                reloaded_texts = await page.locator(".message .text").all_inner_texts()
                reloaded_roles = await page.locator(".message").evaluate_all(
                    "nodes => nodes.map(n => n.dataset.role)"
                )
                await approve.click()
                tiles = page.locator(".message[data-role=assistant]").nth(1)
                await expect(tiles.locator(".text")).to_have_text("tiles cleared", timeout=60_000)
                tiles_output = await tiles.locator(".output").inner_text()
                # and one denied
                await send(page, "clear the maps cache")
                await page.get_by_role("button", name="Deny").click(timeout=60_000)
                maps = page.locator(".message[data-role=assistant]").nth(2)
                await expect(maps.locator(".text")).to_have_text("maps left alone", timeout=60_000)
                maps_state = await maps.locator(".tool").get_attribute("data-state")
                after_reload = await page.evaluate("window.__streams.map(s => s.text)")
                bodies = before_reload + after_reload
        finally:
            released.set()
            for worker in workers:
                worker.kill()
                worker.wait()
    assert shown_before and ANSWER.startswith(shown_before)
    assert first_texts == [ANSWER], "the reply is shown once, not its lost start again"
    assert reloaded_roles == ["user", "assistant", "user", "assistant"]
    assert reloaded_texts == ["tell me something durable", ANSWER, "clear the tiles cache"]
    assert len(provider.requests) == 6
    # the order the browser read: the lost attempt's text, its reset, the reply again
    killed = stream_types(bodies[0])
    assert killed[:3] == ["start", "start-step", "text-start"]
    assert "reset-step" in killed and killed[-2:] == ["finish-step", "finish"]
    after = killed[killed.index("reset-step") :]
    assert "text-start" in after and after.index("text-start") < after.index("text-end")
    assert stream_types(bodies[1])[-3:] == ["finish-step", "tool-approval-request", "finish"]
    assert stream_types(bodies[2])[:2] == ["start", "tool-output-available"]
    assert stream_types(bodies[4])[:2] == ["start", "tool-output-denied"]
    assert tiles_output == "cache tiles cleared" and maps_state == "output-denied"
    assert ran.read_text().split() == ["tiles"], "the approved call ran once; the denied one never"


async def test_the_web_chat_example_runs_with_its_built_in_model(tmp_path: Path) -> None:
    """``python -m examples.web_chat``, as a reader runs it: the page asks, shows the call
    with its buttons, and the approved call's result comes back in the answer."""
    need_ai_sdk()
    process, port = started_on_free_port(
        lambda port: subprocess.Popen(
            [sys.executable, "-m", "examples.web_chat", "--port", str(port)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
    )
    try:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            served = await http.get("/chat")
        async with chromium_page() as page:
            await page.goto(f"{base}/chat?chat=example")
            await send(page, "please clear the tiles cache")
            await page.get_by_role("button", name="Approve").click(timeout=60_000)
            reply = page.locator(".message[data-role=assistant] .text")
            await expect(reply).to_have_text("Done: cache tiles cleared", timeout=60_000)
            reasoning = await page.locator(".reasoning").inner_text()
    finally:
        process.terminate()
        process.wait(20)
    assert served.status_code == 200 and "/chat.js" in served.text
    assert "tiles" in reasoning


async def test_the_manuals_page_asks_and_approves_in_chromium(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """docs/how-to/web-chat.md's page, as it stands, bundled by esbuild: it sends, shows
    the call waiting, is reloaded and shows it again from the door, approves it, and
    the call runs and the answer shows."""
    need_ai_sdk()
    wiped.clear()
    source = tmp_path / "page.jsx"
    source.write_text(page_block("## The page", "jsx", WEB_CHAT))
    script_file = bundle(tmp_path, source)
    script = [assistant_calls(("wipe_cache", {"name": "tiles"})), assistant_text("tiles cleared")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["wipe_cache"], session={})
        async with running_worker(temporal_env, task_queue, registry) as client:
            app = web_chat_app(AgentClient(client, task_queue=task_queue), spec, script_file)
            async with serving(app) as base, chromium_page() as page:
                await page.goto(f"{base}/chat?chat=manual-{task_queue}")
                await send(page, "clear the tiles cache")
                waiting = page.locator(".tool[data-state=approval-requested]")
                await expect(waiting).to_have_count(1, timeout=60_000)
                await page.reload()  # the page loads the chat's past messages
                await expect(waiting).to_have_count(1, timeout=60_000)
                asked = await page.locator(".message[data-role=user] .text").all_inner_texts()
                await page.get_by_role("button", name="Approve").click()
                reply = page.locator(".message[data-role=assistant] .text")
                await expect(reply).to_have_text("tiles cleared", timeout=60_000)
                output = await page.locator(".output").inner_text()
            handle = client.get_workflow_handle(f"conversation-manual-{task_queue}")
            await handle.signal("end_session")
            await handle.result()
    assert asked == ["clear the tiles cache"]
    assert wiped == ["tiles"] and output == "cache tiles cleared"
