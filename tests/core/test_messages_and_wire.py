"""The cases of the "Messages & the Wire Format" guide as tests."""

from __future__ import annotations

import copy
import json
from typing import Any

from durable_agent import AssistantMessage, SystemMessage, ToolMessage, parse_messages, user_message
from durable_agent._contracts.approvals import PendingApproval
from durable_agent._spec.document import AgentInput, AgentSpec
from durable_agent._wire.codecs import (
    build_anthropic_request,
    build_chat_request,
    build_request,
    build_responses_request,
    parse_anthropic_message,
    parse_chat_completion,
    parse_responses_response,
)
from durable_agent._wire.messages import (
    LOCAL_EXTENSIONS,
    ApprovalRecord,
    ImagePart,
    Message,
    RecordedDecision,
    Usage,
    dump_messages,
)
from durable_agent._wire.options import ReasoningWire
from durable_agent._wire.outgoing import pair_tool_results, prepare_request_messages
from durable_agent.testing._in_process import InProcessRun
from tests.support.approval_fixtures import Call, batch_then_text, payments_registry

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


# --- the guide's rules, each shown on what crosses the wire ---------------------------

#: The two-city exchange, typed for the tests below.
WIRE: list[dict[str, Any]] = TWO_CITY_WIRE

#: A user message of every part kind the guide names, in Chat Completions' own shape.
EVERY_PART = {
    "role": "user",
    "content": [
        {"type": "text", "text": "Read all of these."},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}},
        {"type": "input_audio", "input_audio": {"data": "SUQzBA==", "format": "mp3"}},
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
        },
    ],
}


def test_user_parts_of_every_kind_cross_the_chat_wire_verbatim() -> None:
    """A user message's parts are already Chat Completions' content parts: the request
    carries them exactly as they were given."""
    [message] = parse_messages([EVERY_PART])
    assert build_chat_request([message], model="m")["messages"] == [EVERY_PART]


def test_arguments_stay_the_models_text_until_the_tool_runs() -> None:
    """The arguments are the string the model wrote, spacing and broken JSON and all:
    stored as read from the reply and resent as they were, never parsed and written anew."""
    spaced, broken = '{ "city" :"NYC",\n  "unit": "F" }', '{"city": "London"'
    reply = parse_chat_completion(
        {
            "choices": [
                {
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_a",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": spaced},
                            },
                            {
                                "id": "call_b",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": broken},
                            },
                        ],
                    },
                }
            ]
        }
    )
    assert reply.tool_calls is not None
    assert [c.function.arguments for c in reply.tool_calls] == [spaced, broken]
    stored = [
        *parse_messages(WIRE[:2]),
        reply,
        ToolMessage(tool_call_id="call_a", content="72°F and sunny"),
        ToolMessage(tool_call_id="call_b", content="Error: not valid JSON", is_error=True),
    ]
    wire = build_chat_request(stored, model="m")["messages"][2]
    assert [c["function"]["arguments"] for c in wire["tool_calls"]] == [spaced, broken]


async def test_a_batch_is_gated_whole_before_any_of_its_calls_runs() -> None:
    """Four calls, two of them waiting for a person: both are asked before anything runs
    (the ungated calls too), once each; then every call runs and the results join in
    request order."""
    batch: list[Call] = [
        ("lookup", {"customer": "ann"}),
        ("transfer", {"to": "ann", "amount": 5}),
        ("lookup", {"customer": "bob"}),
        ("refund", {"invoice": 7}),
    ]
    ran: list[Call] = []
    ran_when_asked: list[tuple[int, list[Call]]] = []

    def approver(pending: PendingApproval) -> RecordedDecision:
        ran_when_asked.append((pending.slot, list(ran)))
        return "approved"

    spec = AgentSpec.model_validate(
        {"model": {"name": "m"}, "tools": ["transfer", "refund", "lookup"]}
    )
    answer = batch_then_text(batch)
    driver = InProcessRun(
        spec, payments_registry(ran, []), lambda body: answer(body["messages"]), approver
    )
    await driver.run(AgentInput(spec=spec, message="check and pay"))
    assert ran_when_asked == [(1, []), (3, [])]
    assert sorted(ran, key=str) == sorted(batch, key=str)
    results = [m.content for m in driver.session.messages if isinstance(m, ToolMessage)]
    assert results == [
        "ann: good standing",
        "sent 5 to ann",
        "bob: good standing",
        "refunded invoice 7",
    ]


def test_a_failed_tool_result_is_text_the_model_reads_on_every_wire() -> None:
    """No error flag on Chat Completions or Responses: the failure is the result's text.
    The Anthropic API has a flag of its own on a tool result (``is_error``), and gets it
    beside the same text."""
    failed = "Error calling 'get_weather': RuntimeError: service down"
    stored = [
        *parse_messages(WIRE[:3]),
        ToolMessage(tool_call_id="call_a", content=failed, tool_name="get_weather", is_error=True),
        ToolMessage(tool_call_id="call_b", content="55°F and rainy", tool_name="get_weather"),
    ]
    chat = build_chat_request(stored, model="m")["messages"]
    assert chat[3] == {"role": "tool", "tool_call_id": "call_a", "content": failed}
    items = build_responses_request(stored, model="m")["input"]
    [output, _] = [i for i in items if i.get("type") == "function_call_output"]
    assert set(output) == {"type", "call_id", "output"} and output["output"] == failed
    turns = build_anthropic_request(stored, model="m")["messages"]
    results = [b for t in turns for b in t["content"] if b["type"] == "tool_result"]
    assert [(r["content"], r.get("is_error")) for r in results] == [
        (failed, True),
        ("55°F and rainy", None),
    ]


def _with_every_extension(messages: list[Message]) -> list[Message]:
    """The same messages with every local extension a message of its role takes set."""
    usage = Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5)
    common = {
        "id": "m-x",
        "given_id": "m7",
        "source": "import",
        "mode": "user",
        "payload": {"ticket": 7},
        "agent_name": "triage",
        "timestamp": 1_700_000_000_000,
    }
    by_role: dict[str, dict[str, Any]] = {
        "system": {"compacts": None},
        "user": {},
        "assistant": {
            "finish_reason": "tool_calls",
            "is_error": False,
            "usage": usage,
            "model": "fallback-model",
            "voided_usage": usage,
            "malformed_tool_calls": ["<tool_call>{broken"],
            "images": [ImagePart.model_validate({"image_url": {"url": "https://e.com/x.png"}})],
        },
        "tool": {
            "tool_name": "get_weather",
            "is_error": False,
            "usage": usage,
            "approval": ApprovalRecord(decision="approved", by="ops"),
        },
    }
    return [m.model_copy(update={**common, **by_role[m.role]}) for m in messages]


def test_every_local_extension_stays_home_on_every_wire() -> None:
    """Messages with every local extension set (times, finish reasons, tool names, error
    marks, ids, modes, payloads, usage ...) give each wire the very body the bare messages
    give: none of it leaves the process."""
    bare = parse_messages(TWO_CITY_WIRE)
    stamped = _with_every_extension(bare)
    assert {k for m in stamped for k in m.model_dump(exclude_none=True)} >= LOCAL_EXTENSIONS - {
        "error",
        "compacts",
        "blocked",
    }
    for api in ("chat", "responses", "anthropic"):
        assert build_request(api, stamped, model="m") == build_request(api, bare, model="m"), api


# --- reasoning blocks: resent verbatim, in order, on tool-call turns ------------------

#: Three structured blocks of three kinds, as an aggregator returns them on Chat Completions.
CHAT_DETAILS: list[dict[str, Any]] = [
    {"type": "reasoning.summary", "summary": "Two cities: two calls.", "id": "rs-1", "index": 0},
    {
        "type": "reasoning.text",
        "text": "NYC first, then London.",
        "signature": "sig-7f3a",
        "format": "anthropic-claude-v1",
        "index": 1,
    },
    {"type": "reasoning.encrypted", "data": "gAAAAB3xQ==", "format": "openai-v1", "index": 2},
]
#: Anthropic's thinking blocks, signed and redacted, in the order the model wrote them.
ANTHROPIC_THINKING: list[dict[str, Any]] = [
    {"type": "thinking", "thinking": "Two cities.", "signature": "EqQBCkYIARgC"},
    {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
    {"type": "thinking", "thinking": "Ask for NYC, then London.", "signature": "EqQBCkYIAxgD"},
]
#: Responses reasoning items, with a summary, encrypted content, or both.
RESPONSES_REASONING: list[dict[str, Any]] = [
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "Two cities."}],
        "encrypted_content": "gAAAAB-one",
    },
    {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAAB-two"},
    {
        "type": "reasoning",
        "id": "rs_3",
        "summary": [{"type": "summary_text", "text": "NYC, then London."}],
    },
]


def _chat_reply(details: list[dict[str, Any]], calls: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "", "reasoning_details": details}
    if calls:
        message["tool_calls"] = WIRE[2]["tool_calls"]
    else:
        message["content"] = WIRE[5]["content"]
    return {"choices": [{"message": message, "finish_reason": "tool_calls" if calls else "stop"}]}


def _anthropic_reply(thinking: list[dict[str, Any]], calls: bool) -> dict[str, Any]:
    uses = [
        {"type": "tool_use", "id": f"toolu_{c}", "name": "get_weather", "input": {"city": c}}
        for c in ("NYC", "London")
    ]
    tail = uses if calls else [{"type": "text", "text": WIRE[5]["content"]}]
    return {
        "type": "message",
        "role": "assistant",
        "content": [*thinking, *tail],
        "stop_reason": "tool_use" if calls else "end_turn",
    }


def _responses_reply(reasoning: list[dict[str, Any]], calls: bool) -> dict[str, Any]:
    calls_out = [
        {
            "type": "function_call",
            "call_id": f"call_{c}",
            "name": "get_weather",
            "arguments": json.dumps({"city": c}),
        }
        for c in ("NYC", "London")
    ]
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": WIRE[5]["content"]}],
    }
    return {"status": "completed", "output": [*reasoning, *(calls_out if calls else [answer])]}


def _conversation(call_turn: AssistantMessage, final: AssistantMessage) -> list[Message]:
    """The two-city exchange with ``call_turn`` and ``final`` as the model's turns, and a
    next question after them."""
    assert call_turn.tool_calls is not None
    results = [
        ToolMessage(tool_call_id=call.id, content=text)
        for call, text in zip(
            call_turn.tool_calls, ("72°F and sunny", "55°F and rainy"), strict=True
        )
    ]
    return [*parse_messages(WIRE[:2]), call_turn, *results, final, user_message("Paris?")]


def test_structured_reasoning_is_resent_verbatim_in_order_on_every_wire() -> None:
    """Each wire's structured reasoning, read from its reply, goes back on the next request
    element for element, in the order the model wrote it, with the tool-call turn it
    belongs to; the same blocks on a final answer are not sent, and storage keeps both."""
    # Chat Completions: the details list itself, under ``reasoning_details``
    turn = parse_chat_completion(_chat_reply(copy.deepcopy(CHAT_DETAILS), calls=True))
    final = parse_chat_completion(_chat_reply(copy.deepcopy(CHAT_DETAILS[:1]), calls=False))
    stored = _conversation(turn, final)
    sent = build_chat_request(stored, model="m")["messages"]
    assert sent[2]["reasoning_details"] == CHAT_DETAILS
    assert [d["type"] for d in sent[2]["reasoning_details"]] == [
        "reasoning.summary",
        "reasoning.text",
        "reasoning.encrypted",
    ]
    assert not {"reasoning_details", "reasoning_content", "reasoning"} & set(sent[5])
    assert turn.reasoning_details == CHAT_DETAILS and final.reasoning_details == CHAT_DETAILS[:1]

    # Anthropic: the thinking blocks open the assistant turn, before its tool uses
    turn = parse_anthropic_message(_anthropic_reply(copy.deepcopy(ANTHROPIC_THINKING), True))
    final = parse_anthropic_message(_anthropic_reply(copy.deepcopy(ANTHROPIC_THINKING), False))
    turns = build_anthropic_request(_conversation(turn, final), model="m")["messages"]
    assistant = [t["content"] for t in turns if t["role"] == "assistant"]
    assert assistant[0][:3] == ANTHROPIC_THINKING
    assert [b["type"] for b in assistant[0][3:]] == ["tool_use", "tool_use"]
    assert assistant[1] == [{"type": "text", "text": WIRE[5]["content"]}]

    # Responses: the reasoning items, before the function calls they led to
    turn = parse_responses_response(_responses_reply(copy.deepcopy(RESPONSES_REASONING), True))
    final = parse_responses_response(_responses_reply(copy.deepcopy(RESPONSES_REASONING), False))
    items = build_responses_request(_conversation(turn, final), model="m")["input"]
    assert [i for i in items if i.get("type") == "reasoning"] == RESPONSES_REASONING
    kinds = [i.get("type", i.get("role")) for i in items]
    assert kinds[:7] == ["user", "reasoning", "reasoning", "reasoning"] + ["function_call"] * 2 + [
        "function_call_output"
    ]
