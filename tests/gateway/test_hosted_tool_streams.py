"""A hosted tool's call shown wherever a session is read: the console in a real browser
(Debian's headless Chromium), the session's event stream and its AG-UI encoding, and
the OpenAI Chat and Responses doors driven by the official ``openai`` SDK, the AI SDK
door driven by the Vercel AI SDK (its stream, its resume stream, a chat's past messages)
and the A2A door driven by ``a2a-sdk``'s client. The scripted provider answers on the
Responses wire with a ``web_search_call`` item and a cited answer, as OpenAI does."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import openai
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentSpec
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, ProviderItems, UserMessage
from durable_agent.gateway._ai_sdk import ui_messages
from durable_agent.testing import ScriptedProvider
from durable_agent.testing._scripted_provider import RecordedRequest, Reply, render_turn
from tests.gateway.test_ai_sdk_door import as_kept
from tests.support.a2a_peers import a2a_client, events_of, text_message
from tests.support.agent_harness import running_worker
from tests.support.ai_sdk_client import chat_request, user_message, validated
from tests.support.browser import chromium_page, need_chromium
from tests.support.gateway_harness import gateway, read_sse
from tests.support.hosted_replies import responses_searched


def searched(request: RecordedRequest) -> AssistantMessage:
    assert request.body["tools"] == [{"type": "web_search"}], request.body
    return responses_searched("Sunny in Oslo.", "weather oslo")


def spec_file(base_url: str, folder: Path) -> Path:
    """An agent on the scripted provider's Responses wire that may search the web."""
    spec = AgentSpec.model_validate(
        {
            "model": {
                "name": "gpt",
                "endpoint": {"base_url": base_url, "api": "responses", "api_key_env": None},
                "options": {"hosted_tools": [{"name": "web_search"}]},
            },
        }
    )
    path = folder / "spec.json"
    path.write_text(spec.model_dump_json())
    return path


async def test_a_hosted_call_shows_in_the_console_the_event_streams_and_the_doors(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    need_chromium()
    address = str(temporal_env.client.service_client.config.target_host)
    with ScriptedProvider(responder=searched) as provider:
        path = spec_file(provider.base_url, tmp_path)
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


def hosted_parts(message: dict[str, Any]) -> list[tuple[str, Any]]:
    """What a UI message shows of hosted calls and sources: (type, what it names)."""
    found: list[tuple[str, Any]] = []
    for part in message["parts"]:
        if part["type"] == "dynamic-tool" and part.get("providerExecuted"):
            found.append(("tool", (part["toolName"], part["state"], part["input"], part["output"])))
        elif part["type"] == "source-url":
            found.append(("source", (part["url"], part.get("title"))))
    return found


async def test_a_hosted_call_shows_on_the_ai_sdk_and_a2a_doors(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The AI SDK reads a hosted call as a tool its provider ran, and the page it cites
    as a source: on the stream a page resumed (the reply held until it joined), on a
    stream of its own, and in the chat's past messages, which the SDK's own check takes
    whole. The A2A client sees the call as a ``working`` status update."""
    released = threading.Event()
    replies = [
        responses_searched("Sunny in Oslo.", "weather oslo"),
        responses_searched("Rain in Bergen.", "weather bergen", ident="ws_2"),
        responses_searched("Snow in Tromsø.", "weather tromso", ident="ws_3"),
    ]

    def answer(request: RecordedRequest) -> Reply:
        turn = render_turn(replies.pop(0), request)
        return dataclasses.replace(turn, hold=released) if len(replies) == 2 else turn

    address = str(temporal_env.client.service_client.config.target_host)
    with ScriptedProvider(responder=answer) as provider:
        path = spec_file(provider.base_url, tmp_path)
        async with running_worker(temporal_env, task_queue, Registry()):
            with gateway(address, task_queue, path) as base:
                api, chat = f"{base}/api/ai-sdk/chat", f"chat-{task_queue}"
                oslo = user_message("u1", "weather in Oslo?")
                body = {"id": chat, "messages": [oslo], "trigger": "submit-message"}
                async with (
                    httpx.AsyncClient(base_url=base, timeout=60) as http,
                    http.stream("POST", "/api/ai-sdk/chat", json=body) as response,
                ):
                    async for _ in read_sse(response):  # gone before the answer came
                        break

                def on_chunk(chunk: dict[str, Any]) -> None:
                    if chunk["type"] == "start":
                        released.set()

                back = await chat_request(api, chat, [oslo], on_chunk, resume=True)
                bergen = user_message("u2", "and Bergen?")
                second = await chat_request(api, chat, [oslo, back["message"], bergen])
                async with httpx.AsyncClient(timeout=60) as http:
                    loaded = (await http.get(f"{api}/{chat}/messages")).json()
                async with a2a_client(base) as (client, _):
                    told = await events_of(client, text_message("Tromsø?", context_id="c-1"))
    assert back["error"] is None and second["error"] is None
    ran = ("web_search", "output-available", "weather oslo", {"status": "completed"})
    cited = ("https://example.com/weather", "Weather")
    assert hosted_parts(back["message"]) == [("tool", ran), ("source", cited)]
    [call] = [c for c in back["chunks"] if c["type"] == "tool-input-available"]
    assert call["providerExecuted"] is True and call["toolCallId"] == "ws_1"
    [done] = [c for c in second["chunks"] if c["type"] == "tool-output-available"]
    assert done == {
        "type": "tool-output-available",
        "toolCallId": "ws_2",
        "providerExecuted": True,
        "dynamic": True,
        "output": {"status": "completed"},
    }
    assert [c["type"] for c in second["chunks"] if c["type"] == "source-url"] == ["source-url"]
    checked = await validated(loaded)
    assert checked["success"], checked["error"]
    assert checked["data"] == loaded, "the AI SDK kept every field as the door wrote it"
    assert [as_kept(m) for m in loaded] == [
        as_kept(m) for m in [oslo, back["message"], bergen, second["message"]]
    ]
    working = [
        e.status_update.status.message.parts[0].text
        for e in told
        if e.HasField("status_update") and e.status_update.status.message.parts
    ]
    shown = "the provider ran its tool web_search (completed): weather tromso"
    assert shown in working, working
    assert [r.body["tools"] for r in provider.requests] == [[{"type": "web_search"}]] * 3


async def test_a_failed_hosted_call_loads_as_an_error_and_only_web_links_as_sources() -> None:
    """An Anthropic search that failed (its result an error) is a tool part in
    ``output-error``; a citation whose URL is not ``http(s)`` (a ``javascript:`` link a
    page would render) is no source. The AI SDK's own check takes the list."""
    use = {"type": "server_tool_use", "id": "srvtoolu_9", "name": "web_search", "input": {}}
    error = {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}
    found = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_9", "content": error}
    links = [
        {"type": "web_search_result_location", "url": "javascript:alert(1)", "title": "x"},
        {"type": "web_search_result_location", "url": "https://example.com/a", "title": "A"},
        {"type": "web_search_result_location", "url": "https://example.com/a", "title": "A"},
    ]
    said = {"type": "text", "text": "I could not search.", "citations": links}
    reply = AssistantMessage(
        content="I could not search.",
        provider_items=ProviderItems(wire="anthropic", items=[use, found, said]),
    )
    loaded = ui_messages("c", [UserMessage(id="u1", content="search"), reply], [])
    checked = await validated(loaded)
    assert checked["success"], checked["error"]
    parts = loaded[1]["parts"]
    [tool] = [p for p in parts if p["type"] == "dynamic-tool"]
    assert tool["state"] == "output-error" and tool["providerExecuted"] is True
    assert [p["url"] for p in parts if p["type"] == "source-url"] == ["https://example.com/a"]
