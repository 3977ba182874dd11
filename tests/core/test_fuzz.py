"""Fuzzing the parsers that read what providers and people send (hypothesis): random
bytes, random JSON and random unicode, cut at random points. Nothing may raise but the
documented error; malformed input becomes an `is_error` message, never a crash."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from durable_agent import AssistantMessage, parse_messages
from durable_agent._providers import ProviderError
from durable_agent._wire.codecs import parse_response, stream_to_message
from durable_agent._wire.codecs.common import SSEDecoder

APIS = ["chat", "responses", "anthropic"]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
# events shaped like the real ones, with random values in the right places
event_types = st.sampled_from(
    [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "message_delta",
        "response.output_text.delta",
        "response.output_item.added",
        "response.completed",
        "response.function_call_arguments.delta",
        "error",
    ]
)
chat_delta_keys = st.sampled_from(["content", "role", "tool_calls", "reasoning_content"])
chat_choice = st.fixed_dictionaries(
    {"index": st.integers(0, 3)},
    optional={
        "delta": st.dictionaries(chat_delta_keys, json_values, max_size=3),
        "finish_reason": st.sampled_from(["stop", "tool_calls", "length", None]),
    },
)
shaped_events = st.fixed_dictionaries(
    {"type": event_types},
    optional={
        "choices": st.lists(chat_choice, max_size=2),
        "delta": st.dictionaries(st.sampled_from(["text", "type", "partial_json"]), json_values),
        "index": st.integers(0, 3),
        "item": json_values,
        "response": json_values,
        "usage": json_values,
    },
)


def _sse(events: list[Any], done: bool) -> bytes:
    body = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)
    return body + (b"data: [DONE]\n\n" if done else b"")


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@FUZZ
@given(
    api=st.sampled_from(APIS),
    events=st.lists(shaped_events | json_values, max_size=8),
    done=st.booleans(),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
)
def test_random_streams_cut_anywhere_become_a_message(
    api: Any, events: list[Any], done: bool, cuts: list[int]
) -> None:
    message = stream_to_message(api, _split(_sse(events, done), cuts))
    assert isinstance(message, AssistantMessage)
    if not events:
        assert message.is_error  # an empty stream is an error the model activity retries


@FUZZ
@given(
    api=st.sampled_from(APIS),
    data=st.binary(max_size=400),
    cuts=st.lists(st.integers(), max_size=5),
)
def test_random_bytes_as_a_stream_become_a_message(api: Any, data: bytes, cuts: list[int]) -> None:
    assert isinstance(stream_to_message(api, _split(data, cuts)), AssistantMessage)


@FUZZ
@given(
    data=st.binary(max_size=300),
    text=st.text(max_size=200),
    cuts=st.lists(st.integers(), max_size=5),
)
def test_the_sse_decoder_takes_any_bytes(data: bytes, text: str, cuts: list[int]) -> None:
    decoder = SSEDecoder()
    whole = data + f"data: {text}\n\n".encode("utf-8", "surrogatepass")
    for piece in _split(whole, cuts):
        decoder.feed(piece)
    decoder.close()


@FUZZ
@given(
    api=st.sampled_from(APIS),
    body=st.dictionaries(st.text(max_size=10), json_values) | shaped_events,
)
def test_random_response_bodies_parse_or_raise_a_provider_error(api: Any, body: Any) -> None:
    try:
        assert isinstance(parse_response(api, body), AssistantMessage)
    except ProviderError as error:
        assert error.message  # says what was wrong


message_keys = st.sampled_from(["role", "content", "tool_calls", "tool_call_id", "name"])


@FUZZ
@given(payload=st.lists(json_values | st.dictionaries(message_keys, json_values), max_size=4))
def test_random_message_json_is_read_or_refused_with_a_validation_error(payload: Any) -> None:
    try:
        parse_messages(payload)
    except ValidationError as error:
        assert error.errors()


@pytest.mark.parametrize("api", APIS)
def test_malformed_json_in_a_chunk_is_an_error_message(api: Any) -> None:
    message = stream_to_message(api, [b"data: {not json\n\n", b"data: [DONE]\n\n"])
    assert message.is_error and message.error
