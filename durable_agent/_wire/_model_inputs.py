"""What a model takes (images, audio, files), and fitting a request to it.

A model that takes no images (or audio, or files) must not fail a session because a
person sent one: the part is left out of the request with a visible marker in its
place (the array keeps it whole), or, when the spec says so, the message is refused
as it is sent. The wire limits what any model behind it takes too (each codec says
what its wire carries: ``Codec.takes``).

How structured output is asked for is the endpoint's choice as well: ``json_schema``
(OpenAI's strict ``response_format``), ``json_object`` (the form llama.cpp's server and
others take: ``{"type": "json_object", "schema": ...}``), or ``instructions`` (no
request field: the schema goes in a system message, and the answer is validated and
rescued as any other).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from durable_agent._wire._messages import (
    AudioPart,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    UserMessage,
)

PartKind = Literal["image", "audio", "file"]
StructuredOutputMode = Literal["json_schema", "json_object", "instructions"]

_PLURAL = {"image": "images", "audio": "audio", "file": "files"}


class ModelInputs(BaseModel):
    """What the model takes besides text (``ModelSpec.inputs``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    images: bool = True
    audio: bool = True
    files: bool = True
    unsupported: Literal["omit", "refuse"] = "omit"
    """A part the model cannot take: ``omit`` leaves it out of the request (a marker
    says so, and the array keeps it); ``refuse`` refuses the message when it is sent."""
    structured_output: StructuredOutputMode = "json_schema"
    """How an ``output_schema`` is asked for (see the module's words)."""

    def kinds(self) -> frozenset[PartKind]:
        taken: set[PartKind] = set()
        if self.images:
            taken.add("image")
        if self.audio:
            taken.add("audio")
        if self.files:
            taken.add("file")
        return frozenset(taken)


def part_kind(part: ContentPart) -> PartKind | None:
    if isinstance(part, ImagePart):
        return "image"
    if isinstance(part, AudioPart):
        return "audio"
    if isinstance(part, FilePart):
        return "file"
    return None


def omitted(kind: PartKind) -> TextPart:
    """The marker that stands where a part was left out, so the model knows."""
    return TextPart(text=f"[{kind} omitted: this model takes no {_PLURAL[kind]}]")


def fit_to_model(messages: Sequence[Message], takes: frozenset[PartKind]) -> list[Message]:
    """The messages with every part the model does not take replaced by a marker."""
    return _marked(messages, lambda part: _marker(part, takes))


def _marker(part: ContentPart, takes: frozenset[PartKind]) -> TextPart | None:
    """What stands in a part's place in the request (``None``: the part itself)."""
    kind = _left_out(part, takes)
    return omitted(kind) if kind is not None else None


def _marked(
    messages: Sequence[Message], marker: Callable[[ContentPart], TextPart | None]
) -> list[Message]:
    fitted: list[Message] = []
    for message in messages:
        content = getattr(message, "content", None)
        if isinstance(content, list) and any(marker(p) for p in content):
            message = message.model_copy(update={"content": [marker(p) or p for p in content]})
        fitted.append(message)
    return fitted


def _left_out(part: ContentPart, takes: frozenset[PartKind]) -> PartKind | None:
    kind = part_kind(part)
    return kind if kind is not None and kind not in takes else None


def refusal(
    message: UserMessage, inputs: ModelInputs, wire_takes: frozenset[PartKind]
) -> str | None:
    """Why a message is refused (``unsupported: refuse``): the kinds it holds that the
    model, or its wire (which carries ``wire_takes``), does not take."""
    if inputs.unsupported != "refuse" or isinstance(message.content, str):
        return None
    takes = inputs.kinds() & wire_takes
    missing = sorted({k for p in message.content if (k := _left_out(p, takes))})
    if not missing:
        return None
    return "the model takes no " + " or ".join(_PLURAL[k] for k in missing)


def schema_instruction(schema: dict[str, Any]) -> SystemMessage:
    """The system message that asks for structured output in words."""
    return SystemMessage(
        content="Answer with one JSON value that matches this JSON Schema, and nothing "
        "else (no prose, no code fences):\n" + json.dumps(schema, sort_keys=True)
    )


def fit_request(
    messages: Sequence[Message],
    inputs: ModelInputs | None,
    wire_takes: frozenset[PartKind],
    output_schema: dict[str, Any] | None,
) -> tuple[list[Message], dict[str, Any] | None]:
    """The request's messages as the model takes them (of the kinds of part the wire
    carries, ``wire_takes``), and the schema to put in its structured-output field
    (``None`` when the mode asks in words instead). Files by URL stay as they are: the
    worker fetches them, or marks them, once the request is fitted."""
    inputs = inputs or ModelInputs()
    fitted = fit_to_model(messages, inputs.kinds() & wire_takes)
    if output_schema is None or inputs.structured_output == "json_schema":
        return fitted, output_schema
    return [*fitted, schema_instruction(output_schema)], None
