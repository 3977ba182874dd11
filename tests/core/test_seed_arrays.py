"""Arrays written by other agent libraries import as written: a ``resque`` message with
only its content, and ``id`` and ``source`` on any message, parse,
round-trip, cost nothing in payloads while unset, and never reach a provider."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools._registry import Registry
from durable_agent._tools._tool import tool
from durable_agent._wire._messages import (
    AssistantMessage,
    ImagePart,
    ResqueMessage,
    ToolMessage,
    UserMessage,
    dump_messages,
    parse_message,
    parse_messages,
)
from durable_agent._wire.codecs import build_request
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import running_worker, spec_for

SEED_ARRAY: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief.", "id": "m-0", "source": "prompt"},
    {"role": "user", "content": "Weather?", "mode": "user", "agentName": None, "id": "m-1"},
    {"role": "assistant", "content": "", "mode": "tool", "id": "m-2", "source": "model"},
    {"role": "resque", "content": "Tool call arguments were broken", "mode": "tool"},
    {"role": "user", "content": "Weather in Oslo?", "mode": "user", "source": "import"},
    {"role": "assistant", "content": "Rainy.", "id": "m-5"},
]


def seed_array() -> list[dict[str, Any]]:
    return [dict(m) for m in SEED_ARRAY]  # as written, ``agentName`` and all


def test_a_seed_array_parses_and_round_trips() -> None:
    messages = parse_messages(seed_array())
    resque = messages[3]
    assert isinstance(resque, ResqueMessage) and resque.reason is None and resque.strategy is None
    assert messages[4].source == "import" and messages[5].id == "m-5"
    assert parse_messages(json.loads(json.dumps(dump_messages(messages)))) == messages
    unset = UserMessage(content="hi")
    assert '"id"' not in unset.model_dump_json() and '"source"' not in unset.model_dump_json()


def test_ids_sources_and_imported_rescues_never_reach_a_provider() -> None:
    messages = parse_messages(seed_array())
    for api in ("chat", "responses", "anthropic"):
        body = json.dumps(build_request(api, messages, model="m"))  # type: ignore[arg-type]
        for local in ('"m-1"', '"import"', "arguments were broken", '"source": "model"'):
            assert local not in body, (api, local)


async def test_a_session_started_from_a_seed_array_sends_what_a_model_reads(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    history = parse_messages(seed_array())[1:]  # the spec brings its own instructions
    with ScriptedProvider([assistant_text("Still rainy.")]) as provider:
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider), "And tomorrow?", history=history)
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    assert result.status == "done"
    sent = provider.bodies()[0]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert all(set(m) <= {"role", "content"} for m in sent), sent
    assert messages[:5] == history and isinstance(messages[2], ResqueMessage)
    assert isinstance(messages[-1], AssistantMessage)


shouting = Registry()


@tool(registry=shouting)
def shout(word: str) -> str:
    """Say it louder."""
    return word.upper()


async def test_every_message_the_session_makes_has_its_time_and_who_wrote_it(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """What a person sent is ``mode`` ``user``; tool results, the loop's own among them
    (a call over the turn's limit), are ``tool``; every message has a timestamp."""
    script = [
        assistant_calls(("shout", {"word": "a"}), ("shout", {"word": "b"})),
        assistant_text("done"),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["shout"], stop={"max_tool_calls_per_turn": 1})
        async with running_worker(temporal_env, task_queue, shouting) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "shout twice")
            await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [m.mode for m in messages if m.role != "assistant"] == ["user", "tool", "tool"]
    over = messages[3]
    assert isinstance(over, ToolMessage) and over.is_error and "at most 1" in over.content
    assert all(m.timestamp is not None for m in messages), messages  # type: ignore[union-attr]


def test_a_swarm_kit_messages_images_become_image_parts_after_its_text() -> None:
    png = b"\x89PNG\r\n\x1a\n"
    message = parse_message(
        {
            "role": "user",
            "content": "what are these?",
            "mode": "user",
            "images": ["https://example.com/a.png", base64.b64encode(png).decode(), list(png)],
        }
    )
    assert isinstance(message, UserMessage) and isinstance(message.content, list)
    kinds = [part.type for part in message.content]
    assert kinds == ["text", "image_url", "image_url", "image_url"]
    urls = [p.image_url.url for p in message.content if isinstance(p, ImagePart)]
    assert urls[0] == "https://example.com/a.png"
    assert urls[1] == urls[2] == "data:image/png;base64," + base64.b64encode(png).decode()
    with pytest.raises(ValidationError):
        parse_message({"role": "user", "content": "x", "images": ["not base64!"]})


KIT_ARRAY: list[dict[str, Any]] = [
    {"role": "user", "content": "Refund invoice 7", "agentName": "triage"},
    {
        "role": "assistant",
        "content": None,
        "agentName": "billing",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "refund", "arguments": {"invoice": 7, "note": "é"}},
            }
        ],
        "images": ["https://example.com/chart.png"],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "refunded",
        "agentName": "billing",
        "images": [base64.b64encode(b"\x89PNG\r\n\x1a\n....").decode()],
    },
]


def test_a_kit_array_imports_as_written_and_sends_only_what_the_wire_takes() -> None:
    """``agentName`` on any message, tool-call arguments as an object, ``images`` on
    assistant and tool messages: read, kept, and only the wire's fields sent."""
    user, assistant, result = parse_messages(KIT_ARRAY)
    assert (user.agent_name, assistant.agent_name, result.agent_name) == (
        "triage",
        "billing",
        "billing",
    )
    assert isinstance(assistant, AssistantMessage) and assistant.tool_calls is not None
    arguments = assistant.tool_calls[0].function.arguments
    assert arguments == '{"invoice":7,"note":"é"}' and json.loads(arguments)["invoice"] == 7
    assert assistant.images == [
        ImagePart.model_validate({"image_url": {"url": "https://example.com/chart.png"}})
    ]
    assert isinstance(result, ToolMessage) and result.images is not None
    assert result.images[0].image_url.url.startswith("data:image/png;base64,")
    assert parse_messages(dump_messages([user, assistant, result])) == [user, assistant, result]
    for api in ("chat", "responses", "anthropic"):
        body = json.dumps(build_request(api, [user, assistant, result], model="m"))  # type: ignore[arg-type]
        for local in ("agentName", "agent_name", "chart.png", "images", "data:image/png"):
            assert local not in body, (api, local)
        assert "invoice" in body, api  # the arguments went, as the call's JSON text
