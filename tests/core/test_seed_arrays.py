"""Arrays written by other agent libraries import as written: a ``resque`` message with
only its content, and ``id`` and ``source`` on any message, parse,
round-trip, cost nothing in payloads while unset, and never reach a provider."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._session import Session, SessionState
from durable_agent._spec.document import AgentInput, AgentSpec
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import (
    build_request,
    parse_anthropic_message,
    parse_chat_completion,
)
from durable_agent._wire.codecs.responses import parse_responses_response
from durable_agent._wire.messages import (
    AssistantMessage,
    ImagePart,
    ResqueMessage,
    ToolMessage,
    UserMessage,
    dump_messages,
    parse_message,
    parse_messages,
    text_of,
)
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


# --- the assistant message whole, and structured user content ---------------------------

#: An assistant turn with every field the reference gives it, as that reference writes it.
REFERENCE_TURN: dict[str, Any] = {
    "role": "assistant",
    "content": "",
    "tool_calls": [
        {
            "id": "call_abc123",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city":"NYC"}'},
        }
    ],
    "reasoning": "The user wants NYC.",
    "reasoning_details": [
        {"type": "reasoning.text", "text": "The user wants NYC.", "signature": "s1", "index": 0},
        {"type": "reasoning.encrypted", "data": "gAAAAB==", "index": 1},
    ],
    "finish_reason": "tool_calls",
    "timestamp": 1_733_580_000_123,
}


def test_an_assistant_turn_of_the_reference_keeps_every_field_and_sends_the_wires() -> None:
    """``content``, ``tool_calls``, ``reasoning``, ``reasoning_details`` and ``timestamp``
    (an integer of milliseconds) are read and stored as written; the request carries the
    content and calls verbatim and, this being a tool-call turn, the details."""
    turn = parse_message(REFERENCE_TURN)
    assert isinstance(turn, AssistantMessage)
    assert dump_messages([turn]) == [REFERENCE_TURN]
    assert turn.timestamp == 1_733_580_000_123 and isinstance(turn.timestamp, int)
    result = ToolMessage(tool_call_id="call_abc123", content="72°F")
    [_, sent, _] = build_request("chat", [UserMessage(content="NYC?"), turn, result], model="m")[
        "messages"
    ]
    assert sent == {
        "role": "assistant",
        "content": "",
        "tool_calls": REFERENCE_TURN["tool_calls"],
        "reasoning_details": REFERENCE_TURN["reasoning_details"],
    }


def test_a_timestamp_the_session_makes_is_milliseconds_since_the_epoch() -> None:
    """The instructions and the first message a session opens with are stamped with the
    time it is told, as whole milliseconds since the epoch: within the milliseconds read
    around the call (seconds would be a thousand times too small, microseconds a thousand
    times too large)."""
    spec = AgentSpec.model_validate({"model": {"name": "m"}, "instructions": "Be brief."})
    session = Session(spec, SessionState())
    before = time.time_ns() // 1_000_000
    session.start(AgentInput(spec=spec, message="hi"), datetime.now(UTC))
    after = time.time_ns() // 1_000_000
    stamps = [m.timestamp for m in session.messages]
    assert [m.role for m in session.messages] == ["system", "user"]
    assert all(type(t) is int and before <= t <= after for t in stamps), (before, stamps, after)


def test_images_keep_their_order_and_places_on_every_wire() -> None:
    """A message's content is blocks in order: text, then an image, more text, then two
    images (by URL, inline, by URL). Every wire gets them in that order, each image in its
    place between the texts, and ``images`` and the flat text read them in that order."""
    inline = "data:image/png;base64,iVBORw0KGgo="
    message = UserMessage.model_validate(
        {
            "content": [
                {"type": "text", "text": "Compare"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                {"type": "text", "text": "with"},
                {"type": "image_url", "image_url": {"url": inline, "detail": "high"}},
                {"type": "image_url", "image_url": {"url": "https://example.com/c.jpg"}},
            ]
        }
    )
    assert [i.image_url.url for i in message.images if i.image_url] == [
        "https://example.com/a.png",
        inline,
        "https://example.com/c.jpg",
    ]
    assert text_of(message.content) == "Comparewith"
    chat = build_request("chat", [message], model="m")["messages"][0]["content"]
    assert chat == dump_messages([message])[0]["content"]
    responses = build_request("responses", [message], model="m")["input"][0]["content"]
    assert [(p["type"], p.get("text", p.get("image_url"))) for p in responses] == [
        ("input_text", "Compare"),
        ("input_image", "https://example.com/a.png"),
        ("input_text", "with"),
        ("input_image", inline),
        ("input_image", "https://example.com/c.jpg"),
    ]
    anthropic = build_request("anthropic", [message], model="m")["messages"][0]["content"]
    assert anthropic == [
        {"type": "text", "text": "Compare"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        {"type": "text", "text": "with"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
        {"type": "image", "source": {"type": "url", "url": "https://example.com/c.jpg"}},
    ]


def test_a_payload_is_kept_with_its_message_and_never_sent() -> None:
    """The swarm kit's ``payload`` (any JSON, here an image's id) stays on the message
    through storage and never reaches a provider."""
    marker = "7d0c3c56-payload"
    messages = parse_messages(
        [
            {"role": "user", "content": "this one", "payload": {"image_id": marker}},
            {"role": "assistant", "content": "Seen.", "payload": [1, {"image_id": marker}]},
        ]
    )
    assert messages[0].payload == {"image_id": marker}
    assert parse_messages(json.loads(json.dumps(dump_messages(messages)))) == messages
    for api in ("chat", "responses", "anthropic"):
        body = json.dumps(build_request(api, messages, model="m"))
        assert marker not in body and "payload" not in body, api
        assert "this one" in body and "Seen." in body, api


def test_tool_call_blocks_that_cannot_be_read_are_kept_raw() -> None:
    """A call the reply could not give as a call (here: no name) is kept, as the block the
    provider sent, beside the calls that could be read; none of it reaches a request."""
    bad = {"id": "call_x", "type": "function", "function": {"arguments": '{"city":"Oslo"}'}}
    good = {
        "id": "call_y",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
    }
    chat = parse_chat_completion(
        {"choices": [{"message": {"role": "assistant", "tool_calls": [bad, good]}}]}
    )
    bad_use = {"type": "tool_use", "id": "toolu_x", "input": {"city": "Oslo"}}
    anthropic = parse_anthropic_message(
        {
            "type": "message",
            "content": [
                bad_use,
                {"type": "tool_use", "id": "toolu_y", "name": "get_weather", "input": {}},
            ],
            "stop_reason": "tool_use",
        }
    )
    bad_call = {"type": "function_call", "call_id": "call_z", "arguments": '{"city":"Oslo"}'}
    responses = parse_responses_response(
        {
            "output": [
                bad_call,
                {"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": "{}"},
            ]
        }
    )
    for turn, raw in ((chat, bad), (anthropic, bad_use), (responses, bad_call)):
        assert turn.malformed_tool_calls is not None
        assert [json.loads(block) for block in turn.malformed_tool_calls] == [raw]
        assert [c.function.name for c in turn.tool_calls or []] == ["get_weather"]
    stored = parse_messages(json.loads(json.dumps(dump_messages([chat]))))
    assert stored == [chat]
    result = ToolMessage(tool_call_id="call_y", content="Rome: sunny")
    body = json.dumps(build_request("chat", [UserMessage(content="?"), chat, result], model="m"))
    assert "call_x" not in body and "Oslo" not in body


async def test_every_timestamp_a_served_session_writes_is_milliseconds_within_its_run(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """On a worker: the message, the model's replies (stamped by the worker that called
    the model) and the tool results each carry whole milliseconds since the epoch, inside
    the milliseconds read before the start and after the result, in the array's order."""
    script = [assistant_calls(("shout", {"word": "a"})), assistant_text("done")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, shouting) as client:
            agents = AgentClient(client, task_queue=task_queue)
            before = time.time_ns() // 1_000_000
            sid = await agents.start(spec_for(provider, ["shout"]), "shout once")
            await agents.session(sid).result()
            after = time.time_ns() // 1_000_000
            messages = await agents.session(sid).messages()
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    stamps = [m.timestamp for m in messages]
    assert all(type(t) is int and before <= t <= after for t in stamps), (before, stamps, after)
    assert stamps == sorted(stamps), "later messages, later times"
