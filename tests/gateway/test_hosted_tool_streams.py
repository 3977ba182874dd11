"""A hosted tool's call shown wherever a session is read: the console in a real browser
(Debian's headless Chromium), the session's event stream and its AG-UI encoding, and
the OpenAI Chat and Responses doors driven by the official ``openai`` SDK. The scripted
provider answers on the Responses wire with a ``web_search_call`` item, as OpenAI does."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import openai
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentSpec
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import ScriptedProvider
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.support.agent_harness import running_worker
from tests.support.browser import chromium_page, need_chromium
from tests.support.gateway_harness import gateway
from tests.support.hosted_replies import responses_searched


def searched(request: RecordedRequest) -> AssistantMessage:
    assert request.body["tools"] == [{"type": "web_search"}], request.body
    return responses_searched("Sunny in Oslo.", "weather oslo")


async def test_a_hosted_call_shows_in_the_console_the_event_streams_and_the_doors(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    need_chromium()
    address = str(temporal_env.client.service_client.config.target_host)
    with ScriptedProvider(responder=searched) as provider:
        spec = AgentSpec.model_validate(
            {
                "model": {
                    "name": "gpt",
                    "endpoint": {
                        "base_url": provider.base_url,
                        "api": "responses",
                        "api_key_env": None,
                    },
                    "options": {"hosted_tools": [{"name": "web_search"}]},
                },
            }
        )
        path = tmp_path / "spec.json"
        path.write_text(spec.model_dump_json())
        async with running_worker(temporal_env, task_queue, Registry()):
            with gateway(address, task_queue, path) as base:
                async with chromium_page() as page:
                    await page.goto(base)
                    await page.fill("#first", "weather in Oslo?")
                    await page.click("#start-button")
                    shown = page.locator(".msg.hosted")
                    await shown.wait_for(timeout=30_000)
                    card = await shown.inner_text()
                sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="not-needed")
                chat = await sdk.chat.completions.with_raw_response.create(
                    model="durable-agent", messages=[{"role": "user", "content": "weather?"}]
                )
                session = chat.headers["durable-session-id"]
                answer = json.loads(chat.text)
                whole = await sdk.responses.create(model="durable-agent", input="and now?")
                streamed = [
                    e
                    async for e in await sdk.responses.create(
                        model="durable-agent", input="tomorrow?", stream=True
                    )
                ]
                async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                    await http.post(f"/api/sessions/{session}/end", json={})
                    events, agui = [
                        [
                            json.loads(line[5:])
                            for line in (
                                await http.get(
                                    f"/api/sessions/{session}/events",
                                    params={"format": fmt, "after": -1},
                                )
                            ).text.splitlines()
                            if line.startswith("data:")
                        ]
                        for fmt in ("events", "agui")
                    ]
    assert "WEB_SEARCH (RUN BY THE PROVIDER)" in card.upper(), card
    assert "completed: weather oslo" in card, card
    call = {"id": "ws_1", "name": "web_search", "status": "completed", "detail": "weather oslo"}
    assert answer["hosted_tools"] == [call]
    assert answer["choices"][0]["message"]["content"] == "Sunny in Oslo."
    item = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    assert whole.output[0].model_dump(exclude_none=True) == item
    added = [e.item.type for e in streamed if e.type == "response.output_item.added"]
    assert "web_search_call" in added, added
    hosted = [e for e in events if e["type"] == "hosted_tool"]
    assert [{k: e[k] for k in call} for e in hosted] == [call]
    custom = [e for e in agui if e.get("name") == "durable_agent.hosted_tool"]
    assert custom and custom[0]["value"]["name"] == "web_search", agui
