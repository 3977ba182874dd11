"""Property tests: JSON round-trips, and SSE split anywhere gives the same message."""

from __future__ import annotations

import itertools
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durable_agent import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    image_part,
    parse_messages,
)
from durable_agent._wire.codecs import stream_to_message
from durable_agent._wire.codecs.common import parse_sse
from durable_agent._wire.messages import (
    ApprovalRecord,
    FunctionCall,
    ToolCall,
    Usage,
    dump_messages,
    text_part,
)
from durable_agent.testing._scripted_provider import chat_stream_events

text = st.text(max_size=40)
json_scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
tool_calls = st.lists(
    st.builds(
        ToolCall,
        id=st.sampled_from(["call_0", "call_1", "", "toolu_x"]),
        function=st.builds(
            FunctionCall, name=st.sampled_from(["get_weather", "add"]), arguments=text
        ),
    ),
    max_size=3,
)
messages = st.one_of(
    st.builds(SystemMessage, content=text),
    st.builds(
        UserMessage,
        content=text
        | st.lists(
            st.builds(text_part, text)
            | st.builds(
                image_part, st.just("https://x/y.png"), st.sampled_from([None, "low", "high"])
            ),
            min_size=1,
            max_size=3,
        ),
    ),
    st.builds(
        AssistantMessage,
        content=text,
        tool_calls=tool_calls,
        reasoning=st.none() | text,
        reasoning_details=st.none()
        | st.lists(st.dictionaries(text, json_values, max_size=3), max_size=2),
        finish_reason=st.none() | st.sampled_from(["stop", "tool_calls", "length"]),
        is_error=st.none() | st.booleans(),
        timestamp=st.none() | st.integers(0, 2**41),
        usage=st.none() | st.builds(Usage, prompt_tokens=st.integers(0, 10**6)),
    ),
    st.builds(
        ToolMessage,
        tool_call_id=text,
        content=text,
        tool_name=st.none() | text,
        is_error=st.none() | st.booleans(),
        approval=st.none()
        | st.builds(
            ApprovalRecord,
            decision=st.sampled_from(["approved", "denied"]),
            by=st.none() | text,
            reason=st.none() | text,
        ),
    ),
)


@given(st.lists(messages, max_size=6))
def test_message_json_round_trips_unchanged(array: list[object]) -> None:
    dumped = dump_messages(array)  # type: ignore[arg-type]
    restored = parse_messages(json.loads(json.dumps(dumped)))
    assert restored == array
    assert dump_messages(restored) == dumped


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


RECORDED = AssistantMessage.model_validate(
    {
        "content": "Zürich is 12°C — cloudy ☁️ with a chance of rain.",
        "reasoning": "Two cities; I'll call the tool twice. 🌧",
        "tool_calls": [
            {
                "id": "call_0",
                "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'},
            },
            {"id": "call_0", "function": {"name": "get_weather", "arguments": '{"city": "東京"}'}},
        ],
    }
)
STREAM = (
    b"".join(
        f"data: {json.dumps(e, ensure_ascii=False)}\r\n\r\n".encode()
        for e in chat_stream_events(RECORDED)
    )
    + b": keep-alive comment\n\ndata: [DONE]\n\n"
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=40))
def test_sse_split_at_any_points_gives_the_same_message(cuts: list[int]) -> None:
    whole = stream_to_message("chat", [STREAM])
    assert whole.content == RECORDED.content and whole.tool_calls == RECORDED.tool_calls
    assert stream_to_message("chat", _split(STREAM, cuts)) == whole


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=40))
def test_sse_events_do_not_depend_on_chunking(cuts: list[int]) -> None:
    assert parse_sse(_split(STREAM, cuts)) == parse_sse([STREAM])
