"""Our wire output validates against the official openai and anthropic SDK request types."""

from __future__ import annotations

import copy
from typing import Any

import pydantic
import pytest

from durable_agent import (
    AssistantMessage,
    SystemMessage,
    ToolMessage,
    UserMessage,
    audio_part,
    image_part,
    user_message,
)
from durable_agent._wire.codecs import build_request, built_in_codec
from durable_agent._wire.messages import (
    ImagePart,
    ToolDefinition,
    file_part,
    file_part_from_id,
    file_part_from_url,
    image_part_from_bytes,
)
from durable_agent._wire.options import ModelOptions
from durable_agent._wire.outgoing import fit_request
from tests.support.sdk_types import validate_request

WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather for a city",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city", "unit"],
    },
    bound_parameters=("unit",),
)
STRICT = WEATHER.model_copy(update={"name": "strict_weather", "strict": True})
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
    "required": ["city"],
}


def conversation(parts: bool = True) -> list[Any]:
    first = (
        user_message(
            "Compare these",
            image_part("https://example.com/a.png", detail="low"),
            image_part_from_bytes(b"\x89PNG", "image/png"),
            file_part(b"%PDF-1.4", "a.pdf"),
        )
        if parts
        else user_message("Compare NYC and London")
    )
    calls = AssistantMessage.model_validate(
        {
            "content": "",
            "reasoning": "two cities, two calls",
            "tool_calls": [
                {
                    "id": "call_0",
                    "function": {"name": "get_weather", "arguments": '{"city":"NYC"}'},
                },
                {
                    "id": "call_0",
                    "function": {"name": "get_weather", "arguments": '{"city":"London"}'},
                },
            ],
        }
    )
    return [
        SystemMessage(content="You are a helpful weather assistant."),
        first,
        calls,
        ToolMessage(tool_call_id="call_0", content="72F sunny"),
        ToolMessage(tool_call_id="call_0", content="55F rainy", is_error=True),
        AssistantMessage(content="NYC is warmer.", reasoning="dropped on egress"),
        user_message("Thanks"),
    ]


OPTIONS = ModelOptions(temperature=0.2, max_output_tokens=300, top_p=0.9, stop=["END"], seed=7)


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
@pytest.mark.parametrize("with_schema", [False, True])
def test_full_conversation_validates(api: str, with_schema: bool) -> None:
    # anthropic 2.11 no longer types temperature/top_p/top_k (we still send them when a
    # user sets them: older models take them, and the conformance vectors expect them).
    options = ModelOptions(max_output_tokens=300, stop=["END"]) if api == "anthropic" else OPTIONS
    body = build_request(
        api,  # type: ignore[arg-type]
        conversation(),
        model="some-model",
        tools=[WEATHER, STRICT],
        options=options,
        output_schema=SCHEMA if with_schema else None,
    )
    if api == "chat":
        # reasoning_content is the deliberate, non-standard extension (the wire-format guide).
        assert body["messages"][2].pop("reasoning_content") == "two cities, two calls"
    validate_request(api, body)


def test_audio_validates_for_chat() -> None:
    body = build_request(
        "chat", [user_message("listen", audio_part(b"RIFF", "audio/x-wav"))], model="m"
    )
    assert body["messages"][0]["content"][1] == {
        "type": "input_audio",
        "input_audio": {"data": "UklGRg==", "format": "wav"},
    }
    validate_request("chat", body)


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_an_image_by_the_providers_file_id_validates_as_each_wire_carries_it(api: str) -> None:
    """Responses takes ``input_image`` by ``file_id``, Anthropic an image whose source is a
    ``file``; Chat Completions takes images by URL only, so its request says the image
    was left out (and sends no id)."""
    message = user_message("what is this?", image_part(file_id="file-img-1"))
    assert message.images == [ImagePart(file_id="file-img-1")]
    body = build_request(api, [message], model="m")  # type: ignore[arg-type]
    validate_request(api, body)
    part = body["input" if api == "responses" else "messages"][0]["content"][1]
    if api == "responses":
        assert part == {"type": "input_image", "file_id": "file-img-1", "detail": "auto"}
    elif api == "anthropic":
        assert part == {"type": "image", "source": {"type": "file", "file_id": "file-img-1"}}
    else:
        assert part["type"] == "text" and "no image by file id" in part["text"]
        assert "file-img-1" not in str(body)


def test_an_image_is_given_one_way() -> None:
    with pytest.raises(ValueError, match="one of them"):
        ImagePart()
    with pytest.raises(ValueError, match="not both"):
        image_part("https://example.com/a.png", file_id="file-1")
    by_url = image_part("https://example.com/a.png")
    assert by_url.model_dump() == {
        "type": "image_url",
        "image_url": {"url": "https://example.com/a.png", "detail": None},
    }, "an image by URL keeps the shape it always had (and its transcript hash)"
    seeded = UserMessage.model_validate({"content": "two", "images": [{"file_id": "f-2"}]})
    assert seeded.images == [ImagePart(file_id="f-2")]


def test_file_id_validates_everywhere() -> None:
    for api in ("chat", "responses", "anthropic"):
        body = build_request(api, [user_message("read", file_part_from_id("file-1"))], model="m")  # type: ignore[arg-type]
        validate_request(api, body)


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_a_file_by_url_validates_as_each_wire_carries_it(api: str) -> None:
    """Responses and Anthropic take the URL (the provider fetches it, never the worker);
    Chat Completions has no such part, so its codec says the file was left out (the
    worker sends inline only the files its owner lets it fetch)."""
    url = "https://example.com/report.pdf"
    messages = [user_message("read", file_part_from_url(url, "report.pdf"))]
    fitted, _ = fit_request(messages, None, built_in_codec(api).takes, None)
    body = build_request(api, fitted, model="m")  # type: ignore[arg-type]
    validate_request(api, body)
    part = body["input" if api == "responses" else "messages"][0]["content"][1]
    if api == "responses":
        assert part == {"type": "input_file", "file_url": url, "filename": "report.pdf"}
    elif api == "anthropic":
        assert part == {"type": "document", "source": {"type": "url", "url": url}}
    else:
        assert part == {
            "type": "text",
            "text": "[file omitted: Chat Completions takes no file by URL]",
        }
        assert url not in str(body)


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_validator_rejects_a_broken_body(api: str) -> None:
    # The check itself must be able to fail: an unknown key deep inside is caught.
    body = build_request(api, conversation(parts=False), model="m", tools=[WEATHER])  # type: ignore[arg-type]
    broken = copy.deepcopy(body)
    key = "input" if api == "responses" else "messages"
    broken[key][-1]["bogus_field"] = 1
    with pytest.raises(pydantic.ValidationError):
        validate_request(api, broken)


@pytest.mark.parametrize(
    ("media_type", "wire_format"),
    [
        ("audio/wav", "wav"),
        ("audio/x-wav", "wav"),
        ("audio/mp3", "mp3"),
        ("audio/mpeg", "mp3"),
        ("audio/flac", "flac"),
        ("audio/ogg", "ogg"),
        ("audio/webm", "webm"),  # any other audio type: its name after ``audio/``
    ],
)
def test_each_audio_media_type_maps_to_the_format_the_wire_names(
    media_type: str, wire_format: str
) -> None:
    body = build_request("chat", [user_message("hear", audio_part(b"RIFF", media_type))], model="m")
    assert body["messages"][0]["content"][1]["input_audio"]["format"] == wire_format
    if wire_format in ("wav", "mp3"):  # the two formats the SDK's type names
        validate_request("chat", body)


def test_a_media_type_that_is_not_audio_is_refused_with_what_was_expected() -> None:
    with pytest.raises(ValueError, match=r"expected audio/\*"):
        audio_part(b"RIFF", "video/mp4")


def test_options_map_by_the_table_and_one_a_wire_lacks_is_left_out() -> None:
    """Each option under the name its API gives it; an option an API does not have (``top_k``
    on Chat Completions; the penalties and ``seed`` on Anthropic) is left out, not refused."""
    options = ModelOptions(
        temperature=0.5,
        max_output_tokens=10,
        top_p=0.9,
        top_k=40,
        frequency_penalty=0.1,
        presence_penalty=0.2,
        stop=["END"],
        seed=7,
    )
    sent = {}
    for api in ("chat", "anthropic"):
        body = build_request(api, [user_message("hi")], model="m", options=options)
        sent[api] = {k: v for k, v in body.items() if k not in ("model", "messages")}
    assert sent["chat"] == {
        "temperature": 0.5,
        "max_completion_tokens": 10,
        "top_p": 0.9,
        "frequency_penalty": 0.1,
        "presence_penalty": 0.2,
        "stop": ["END"],
        "seed": 7,
    }
    assert sent["anthropic"] == {
        "temperature": 0.5,
        "max_tokens": 10,
        "top_p": 0.9,
        "top_k": 40,
        "stop_sequences": ["END"],
    }
