"""The foundation at work: build request bodies, then read a recorded stream over HTTP.

Run with ``./run demo``. No API key and no network needed: the recorded stream
is served by the scripted provider on 127.0.0.1 and read by the real client.
"""

from __future__ import annotations

import asyncio
import json
from importlib import resources

from durable_agent import Message, SystemMessage, ToolDefinition, dump_messages, user_message
from durable_agent.codecs import build_request, parse_sse, stream_to_message
from durable_agent.provider import ProviderEndpoint, shared_client
from durable_agent.testing import Reply, ScriptedProvider

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


def recorded_stream() -> bytes:
    return (
        resources.files("durable_agent.testing") / "recordings" / "two_city_turn.sse"
    ).read_bytes()


async def run() -> None:
    conversation: list[Message] = [
        SystemMessage(content="You are a helpful weather assistant."),
        user_message("What's the weather in NYC and London?"),
    ]
    for api in ("chat", "responses", "anthropic"):
        body = build_request(api, conversation, model="example-model", tools=[WEATHER])
        print(f"--- {api} request body")
        print(json.dumps(body, indent=2, ensure_ascii=False))

    data = recorded_stream()
    events = parse_sse([data])
    chunks = tuple(data[i : i + 37] for i in range(0, len(data), 37))  # split anywhere
    with ScriptedProvider([Reply(sse=True, chunks=chunks)]) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        body = build_request(
            "chat", conversation, model="deepseek-v4", tools=[WEATHER], stream=True
        )
        message = await shared_client().complete(endpoint, body)
    assert message == stream_to_message("chat", [data])
    print(f"--- recorded stream: {len(data)} bytes, {len(events)} events, {len(chunks)} chunks")
    print(json.dumps(dump_messages([message]), indent=2, ensure_ascii=False))

    follow_up: list[Message] = [*conversation, message]
    wire = build_request("chat", follow_up, model="deepseek-v4")["messages"]
    print("--- the tool-call turn as it is resent (reasoning kept on tool-call turns)")
    print(json.dumps(wire[2], indent=2, ensure_ascii=False))
    print(f"--- calls without results yet are answered on the wire: {wire[3]['content']!r}")


def main() -> None:
    asyncio.run(run())


if __name__ == "__main__":
    main()
