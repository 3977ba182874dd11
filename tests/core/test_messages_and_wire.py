"""The cases of the "Messages & the Wire Format" guide as tests."""

from __future__ import annotations

import json

from durable_agent import AssistantMessage, SystemMessage, ToolMessage, parse_messages, user_message
from durable_agent._wire._messages import dump_messages
from durable_agent._wire._model_options import ReasoningWire
from durable_agent._wire._pairing import pair_tool_results
from durable_agent._wire._request_messages import prepare_request_messages
from durable_agent._wire.codecs import (
    build_anthropic_request,
    build_chat_request,
    build_responses_request,
)

TWO_CITY_WIRE = [
    {"role": "system", "content": "You are a helpful weather assistant."},
    {"role": "user", "content": "What's the weather in NYC and London?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"NYC"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"London"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "72°F and sunny"},
    {"role": "tool", "tool_call_id": "call_b", "content": "55°F and rainy"},
    {"role": "assistant", "content": "NYC is 72°F and sunny; London is 55°F and rainy."},
]


def test_six_message_two_city_exchange_is_exactly_the_wire() -> None:
    messages = parse_messages(TWO_CITY_WIRE)
    assert [m.role for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert dump_messages(messages) == TWO_CITY_WIRE
    assert build_chat_request(messages, model="m")["messages"] == TWO_CITY_WIRE


def test_stored_extensions_never_reach_the_wire() -> None:
    stored = [
        *parse_messages(TWO_CITY_WIRE[:3]),
        ToolMessage(
            tool_call_id="call_a",
            content="72°F and sunny",
            tool_name="get_weather",
            is_error=False,
            timestamp=1,
        ),
        ToolMessage(tool_call_id="call_b", content="55°F and rainy", tool_name="get_weather"),
        AssistantMessage(
            content=TWO_CITY_WIRE[5]["content"],
            finish_reason="stop",
            timestamp=2,
            reasoning="final thoughts",
        ),
    ]
    assert build_chat_request(stored, model="m")["messages"] == TWO_CITY_WIRE


def test_reasoning_resent_on_tool_call_turn_and_dropped_on_final_turn() -> None:
    call_turn = AssistantMessage.model_validate(
        {
            **TWO_CITY_WIRE[2],
            "reasoning": "The user wants two cities. I'll call get_weather for each.",
        }
    )
    final = AssistantMessage(content=TWO_CITY_WIRE[5]["content"], reasoning="Summarise both.")
    stored = [
        *parse_messages(TWO_CITY_WIRE[:2]),
        call_turn,
        *parse_messages(TWO_CITY_WIRE[3:5]),
        final,
        user_message("And Paris?"),
    ]

    wire = build_chat_request(stored, model="m")["messages"]
    assert (
        wire[2]["reasoning_content"] == "The user wants two cities. I'll call get_weather for each."
    )
    assert "reasoning_content" not in wire[5] and "reasoning" not in wire[5]
    # storage keeps everything; prepare returns a fresh array
    assert stored[5].reasoning == "Summarise both."
    prepared = prepare_request_messages(stored)
    assert prepared[5].reasoning is None and prepared is not stored  # type: ignore[union-attr]


def test_reasoning_field_is_configurable_per_provider() -> None:
    details = [{"type": "reasoning.text", "text": "think", "signature": "sig", "index": 0}]
    turn = AssistantMessage.model_validate(
        {**TWO_CITY_WIRE[2], "reasoning": "think", "reasoning_details": details}
    )
    empty_turn = AssistantMessage.model_validate({**TWO_CITY_WIRE[2], "reasoning": ""})
    base = parse_messages(TWO_CITY_WIRE[:2])
    tail = parse_messages(TWO_CITY_WIRE[3:5])

    def assistant_wire(message: AssistantMessage, policy: ReasoningWire) -> dict[str, object]:
        return build_chat_request([*base, message, *tail], model="m", reasoning=policy)["messages"][
            2
        ]

    # details verbatim when present, never both
    wire = assistant_wire(turn, ReasoningWire())
    assert wire["reasoning_details"] == details and "reasoning_content" not in wire
    # a provider that takes only the flat field, under its own name
    wire = assistant_wire(turn, ReasoningWire(field="reasoning", send_details=False))
    assert wire["reasoning"] == "think" and "reasoning_details" not in wire
    # an empty reasoning string is omitted by default ...
    assert "reasoning_content" not in assistant_wire(empty_turn, ReasoningWire())
    # ... and sent as "" for providers that demand the key on tool-call turns
    assert assistant_wire(empty_turn, ReasoningWire(send_empty=True))["reasoning_content"] == ""
    # never resent when the provider takes none
    wire = assistant_wire(turn, ReasoningWire(field=None, send_details=False))
    assert not {"reasoning", "reasoning_content", "reasoning_details"} & set(wire)


COLLIDING = [
    {"role": "user", "content": "NYC, London, then Paris"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "w", "arguments": '{"c":"NYC"}'},
            },
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "w", "arguments": '{"c":"LON"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "nyc-result"},
    {"role": "tool", "tool_call_id": "call_0", "content": "lon-result"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "w", "arguments": '{"c":"PAR"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": "par-result"},
]


def test_colliding_ids_pair_by_order() -> None:
    messages = parse_messages(COLLIDING)
    report = pair_tool_results(messages)
    assert report.is_paired
    pairs = [
        (json.loads(call.function.arguments)["c"], result.content)  # type: ignore[union-attr]
        for exchange in report.exchanges
        for call, result in zip(exchange.calls, exchange.results, strict=True)
    ]
    assert pairs == [("NYC", "nyc-result"), ("LON", "lon-result"), ("PAR", "par-result")]


def test_colliding_ids_are_made_unique_for_responses_and_anthropic() -> None:
    messages = parse_messages(COLLIDING)
    items = build_responses_request(messages, model="m")["input"]
    calls = [(i["call_id"], i["arguments"]) for i in items if i.get("type") == "function_call"]
    outputs = [
        (i["call_id"], i["output"]) for i in items if i.get("type") == "function_call_output"
    ]
    assert len({c for c, _ in calls}) == 3
    by_id = dict(calls)
    assert [json.loads(by_id[c])["c"] for c, _ in outputs] == ["NYC", "LON", "PAR"]
    assert [o for _, o in outputs] == ["nyc-result", "lon-result", "par-result"]
    # deterministic: the same array gives the same ids
    assert build_responses_request(messages, model="m") == build_responses_request(
        messages, model="m"
    )

    turns = build_anthropic_request(messages, model="m")["messages"]
    uses = [b for t in turns for b in t["content"] if b["type"] == "tool_use"]
    results = [b for t in turns for b in t["content"] if b["type"] == "tool_result"]
    assert len({u["id"] for u in uses}) == 3
    inputs = {u["id"]: u["input"]["c"] for u in uses}
    assert [(inputs[r["tool_use_id"]], r["content"]) for r in results] == [
        ("NYC", "nyc-result"),
        ("LON", "lon-result"),
        ("PAR", "par-result"),
    ]
    # all results of one batch ride in one user turn
    assert [
        len([b for b in t["content"] if b["type"] == "tool_result"])
        for t in turns
        if t["role"] == "user"
    ] == [0, 2, 1]


def test_dangling_calls_and_orphan_results_never_reach_the_wire_unpaired() -> None:
    messages = [
        SystemMessage(content="s"),
        ToolMessage(tool_call_id="x", content="orphan before any call"),
        *parse_messages(COLLIDING[:3]),  # second call of the batch has no result
        ToolMessage(tool_call_id="y", content="never asked"),  # wrongly placed? no: answers call 2
        user_message("next"),
        ToolMessage(tool_call_id="z", content="orphan after a user turn"),
    ]
    wire = build_chat_request(messages, model="m")["messages"]
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "tool", "user"]
    dangling = parse_messages(COLLIDING[:3])
    wire = build_chat_request(dangling, model="m")["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "tool"]
    assert wire[3]["content"].startswith("Error: this tool call was not executed")
    assert pair_tool_results(prepare_request_messages(dangling)).is_paired
