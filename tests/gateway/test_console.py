"""The web console in a real browser: Debian's headless Chromium, driven by Playwright
(pointed at that executable; nothing is downloaded). A person starts a session, sees
the approval card, approves, watches the answer stream in token by token and sees the
final answer. A screenshot is kept in ``.test-output/console.png``."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

from playwright.async_api import Locator
from temporalio.testing import WorkflowEnvironment

from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import chat_stream_events, sse_reply
from tests.support import cli_tools
from tests.support.agent_harness import running_worker, spec_for
from tests.support.browser import chromium_page, need_chromium
from tests.support.gateway_harness import ROOT, gateway

ANSWER = (
    "The tiles cache is cleared. It held 1,204 files from last week's map renders; "
    "the next request rebuilds what it needs."
)
registry = Registry([cli_tools.wipe_cache])


async def test_a_person_starts_approves_and_watches_the_answer_stream_in(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    need_chromium()
    # the answer stops at a barrier after three chunks until the page has shown part of
    # it (a paced stream could be whole before a loaded machine's page looked)
    seen_partial = threading.Event()
    answer = sse_reply(chat_stream_events(assistant_text(ANSWER)), delay=0.02)
    script = [
        assistant_calls(("wipe_cache", {"name": "tiles"})),
        dataclasses.replace(answer, hold=seen_partial, hold_after=4),
    ]
    address = str(temporal_env.client.service_client.config.target_host)
    with ScriptedProvider(script) as provider:
        spec = tmp_path / "spec.json"
        spec.write_text(spec_for(provider, ["wipe_cache"], session={}).model_dump_json())
        async with running_worker(temporal_env, task_queue, registry):
            with gateway(address, task_queue, spec) as base:
                async with chromium_page() as page:
                    await page.goto(base)
                    await page.fill("#first", "please clear the tiles cache")
                    await page.click("#start-button")
                    card = page.locator(".approval")
                    await card.wait_for(timeout=30_000)
                    card_text = await card.inner_text()
                    # the call whole (what runs) beside its readable form
                    assert 'wipe_cache({"name": "tiles"})' in card_text, card_text
                    await card.get_by_role("button", name="Approve").click()
                    await page.locator(".approval .decision").wait_for(timeout=30_000)
                    decision = await page.locator(".approval .decision").inner_text()
                    # the answer, while it streams: partial text, growing
                    streaming = page.locator(".msg.assistant.streaming .body")
                    await streaming.wait_for(timeout=30_000)
                    partial = await _partial_text(streaming)
                    seen_partial.set()
                    final = page.locator('.msg.assistant[data-final="true"] .body').last
                    await page.wait_for_function(
                        "text => [...document.querySelectorAll('.msg.assistant[data-final]')]"
                        ".some(el => el.querySelector('.body').textContent === text)",
                        arg=ANSWER,
                        timeout=30_000,
                    )
                    shown = await final.inner_text()
                    tool_result = await page.locator(".msg.tool .body").inner_text()
                    user = await page.locator(".msg.user .body").inner_text()
                    listed = page.locator("#sessions li.selected .title")
                    await page.wait_for_function(  # the list re-renders: the row may be gone
                        "() => document.querySelector('#sessions li.selected .title')"
                        "?.textContent.startsWith('please') === true",
                        timeout=30_000,
                    )
                    title = await listed.inner_text()
                    out = ROOT / ".test-output"
                    out.mkdir(exist_ok=True)
                    await page.screenshot(path=str(out / "console.png"), full_page=True)
    assert decision.startswith("approved by console"), decision
    assert 0 < len(partial) < len(ANSWER) and ANSWER.startswith(partial), partial
    assert shown == ANSWER
    assert tool_result == "cache tiles cleared"
    assert user == "please clear the tiles cache"
    assert title == "please clear the tiles cache"
    print(f"\nscreenshot: {ROOT / '.test-output' / 'console.png'}")


async def _partial_text(streaming: Locator) -> str:
    """The streaming reply's text at a moment when it is neither empty nor whole."""
    for _ in range(200):
        text = await streaming.inner_text()
        if 0 < len(text) < len(ANSWER):
            return text
        await streaming.page.wait_for_timeout(25)
    return await streaming.inner_text()
