"""Stream and response processing edge cases for each API."""

from __future__ import annotations

import json
from typing import Any

from durable_agent._wire.codecs import (
    SSEEvent,
    built_in_codec,
    parse_chat_completion,
    reply_body_of,
    reply_events_of,
    stream_to_message,
)
from durable_agent._wire.messages import Usage
from durable_agent.testing import assistant_calls, assistant_text


def sse(*events: Any, done: bool = True) -> list[bytes]:
    chunks = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
    return chunks + ([b"data: [DONE]\n\n"] if done else [])


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def finish(reason: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def test_argument_fragments_accumulate_by_index_even_when_ids_repeat_or_are_empty() -> None:
    message = stream_to_message(
        "chat",
        sse(
            delta(
                tool_calls=[
                    {"index": 0, "id": "call_0", "function": {"name": "add", "arguments": '{"a":'}}
                ]
            ),
            delta(tool_calls=[{"index": 0, "id": "call_0", "function": {"arguments": " 1}"}}]),
            delta(
                tool_calls=[{"index": 1, "id": "", "function": {"name": "sub", "arguments": ""}}]
            ),
            delta(tool_calls=[{"index": 1, "id": "", "function": {"arguments": '{"b": 2}'}}]),
            finish("tool_calls"),
        ),
    )
    assert message.is_error is None
    assert [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []] == [
        ("call_0", "add", '{"a": 1}'),
        ("call_1", "sub", '{"b": 2}'),
    ]
    assert message.content == "" and message.finish_reason == "tool_calls"


def test_fragments_without_index_follow_the_id() -> None:
    message = stream_to_message(
        "chat",
        sse(
            delta(tool_calls=[{"id": "a", "function": {"name": "f", "arguments": "{"}}]),
            delta(tool_calls=[{"function": {"arguments": "}"}}]),
            delta(tool_calls=[{"id": "b", "function": {"name": "g", "arguments": "{}"}}]),
            finish("tool_calls"),
        ),
    )
    assert [(c.id, c.function.arguments) for c in message.tool_calls or []] == [
        ("a", "{}"),
        ("b", "{}"),
    ]


def test_reasoning_read_from_either_field_and_details_accumulated_verbatim() -> None:
    message = stream_to_message(
        "chat",
        sse(
            delta(reasoning="Let me "),
            delta(reasoning_content="think."),
            delta(
                reasoning_details=[
                    {"type": "reasoning.text", "text": "Let me ", "index": 0, "format": "x"}
                ]
            ),
            delta(
                reasoning_details=[
                    {"type": "reasoning.text", "text": "think.", "index": 0, "signature": "sig-1"}
                ]
            ),
            delta(
                reasoning_details=[{"type": "reasoning.encrypted", "data": "opaque==", "index": 1}]
            ),
            delta(content="Answer"),
            finish("stop"),
            {
                "choices": [],
                "usage": {
                    "prompt_tokens": 3,
                    "completion_tokens": 4,
                    "total_tokens": 7,
                    "completion_tokens_details": {"reasoning_tokens": 2},
                },
            },
        ),
    )
    assert message.reasoning == "Let me think."
    assert message.reasoning_details == [
        {
            "type": "reasoning.text",
            "text": "Let me think.",
            "index": 0,
            "format": "x",
            "signature": "sig-1",
        },
        {"type": "reasoning.encrypted", "data": "opaque==", "index": 1},
    ]
    assert message.usage is not None and message.usage.reasoning_tokens == 2
    assert message.content == "Answer" and not message.is_error


def test_empty_stream_is_an_error_turn() -> None:
    message = stream_to_message("chat", sse(finish("stop")))
    assert message.is_error and message.error and "empty completion" in message.error
    assert stream_to_message("chat", []).is_error


def test_stream_cut_before_done_keeps_partial_text_and_drops_partial_calls() -> None:
    message = stream_to_message(
        "chat",
        sse(
            delta(content="Partial"),
            delta(
                tool_calls=[{"index": 0, "id": "c", "function": {"name": "f", "arguments": '{"x"'}}]
            ),
            done=False,
        ),
    )
    assert message.is_error and message.error == "stream ended before [DONE]"
    assert message.content == "Partial" and message.tool_calls is None
    assert message.malformed_tool_calls
    assert json.loads(message.malformed_tool_calls[0])["function"]["arguments"] == '{"x"'


def test_malformed_json_chunk_fails_the_turn_with_a_reason() -> None:
    message = stream_to_message("chat", [b'data: {"choices": [\n\n', *sse(delta(content="x"))])
    assert message.is_error and message.error and "malformed JSON" in message.error


def test_error_object_in_stream() -> None:
    message = stream_to_message(
        "chat", sse({"error": {"message": "overloaded", "type": "server_error"}})
    )
    assert (
        message.is_error and message.error == "provider error in stream: server_error: overloaded"
    )


def test_whole_response_null_content_becomes_empty_string_and_ids_are_kept() -> None:
    message = parse_chat_completion(
        {
            "choices": [
                {
                    "message": {
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_0",
                                "type": "function",
                                "function": {"name": "f", "arguments": {"a": 1}},
                            },
                            {"type": "function", "function": {"arguments": "{}"}},
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ]
        }
    )
    assert message.content == ""
    assert [(c.id, c.function.arguments) for c in message.tool_calls or []] == [
        ("call_0", '{"a":1}')
    ]
    assert message.malformed_tool_calls == ['{"type":"function","function":{"arguments":"{}"}}']


def test_anthropic_stream_with_thinking_and_tool_use() -> None:
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "role": "assistant",
                "content": [],
                "usage": {"input_tokens": 9, "output_tokens": 0},
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "Hmm."},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": "S"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "text_delta", "text": "Checking"},
        },
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "w", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '{"c":'},
        },
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": '"P"}'},
        },
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    chunks = [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
    message = stream_to_message("anthropic", chunks)
    assert message.content == "Checking" and message.finish_reason == "tool_calls"
    assert message.reasoning == "Hmm."
    assert message.reasoning_details == [{"type": "thinking", "thinking": "Hmm.", "signature": "S"}]
    assert [(c.id, c.function.arguments) for c in message.tool_calls or []] == [
        ("toolu_1", '{"c":"P"}')
    ]
    assert message.usage is not None and (
        message.usage.prompt_tokens,
        message.usage.completion_tokens,
    ) == (9, 5)
    cut = stream_to_message("anthropic", chunks[:-1])
    assert cut.is_error and cut.error == "stream ended before message_stop"


def test_responses_stream_uses_the_final_response() -> None:
    final = {
        "status": "completed",
        "output": [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "plan"}],
                "encrypted_content": "enc",
            },
            {"type": "function_call", "call_id": "call_9", "name": "w", "arguments": "{}"},
        ],
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    chunks = [
        b'data: {"type": "response.output_text.delta", "delta": "x"}\n\n',
        f"data: {json.dumps({'type': 'response.completed', 'response': final})}\n\n".encode(),
    ]
    message = stream_to_message("responses", chunks)
    assert message.tool_calls and message.tool_calls[0].id == "call_9"
    assert message.reasoning == "plan" and message.reasoning_details == [final["output"][0]]
    assert stream_to_message("responses", chunks[:1]).is_error


# --- each built-in codec answers as its wire: the inverse of its parser ---------------


def test_each_codec_renders_a_reply_its_own_parser_reads_back_whole_and_streamed() -> None:
    """What the test kit's models answer with: for each built-in wire, the reply body and
    the stream a codec renders for a message read back as that message (text, calls in
    order, finish reason, usage)."""

    usage = Usage(prompt_tokens=12, completion_tokens=7, total_tokens=19)
    calls = assistant_calls(("a", {"x": 1}), ("b", {"y": "two"}), usage=usage)
    text = assistant_text("A long enough answer to come in several pieces.", usage=usage)
    for api in ("chat", "responses", "anthropic"):
        codec = built_in_codec(api)
        for message in (calls, text):
            whole = codec.parse_response(reply_body_of(codec, message) or {})
            events = reply_events_of(codec, message) or []
            accumulator = codec.new_stream_accumulator()  # type: ignore[attr-defined]
            for event in events:
                data = event if isinstance(event, str) else json.dumps(event)
                accumulator.add(SSEEvent(data=data))
            streamed = accumulator.finish()
            for got in (whole, streamed):
                assert not got.is_error, (api, got.error)
                assert got.content == message.content, api
                assert _calls(got) == _calls(message), api
                assert got.finish_reason == ("tool_calls" if message.tool_calls else "stop")
                assert got.usage is not None and got.usage.completion_tokens == 7, api
            assert len(events) > 3 or not message.content, "text in pieces, as streamed"
    assert reply_body_of(built_in_codec("embeddings"), text) is None  # a codec without one


def _calls(message: Any) -> list[tuple[str, str, Any]]:
    """Each call's id, name and arguments as a value (a wire may space its JSON apart)."""
    said = message.tool_calls or []
    return [(c.id, c.function.name, json.loads(c.function.arguments)) for c in said]
