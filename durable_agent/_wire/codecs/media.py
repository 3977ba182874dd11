"""OpenAI embeddings and image generation: their requests and replies, and both as wire
APIs, so an agent whose endpoint names ``embeddings`` or ``images`` answers each turn with
what that model makes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from durable_agent._wire.codecs.chat import OPTION_NAMES as CHAT_OPTION_NAMES
from durable_agent._wire.codecs.common import built_keys, map_options, with_extra
from durable_agent._wire.messages import AssistantMessage, Message, TextPart, Usage, UserMessage
from durable_agent._wire.options import ModelOptions

EMBEDDINGS_PATH = "/embeddings"

#: What each request writes itself (``with_extra``); ``extra`` adds the rest (an
#: embeddings model's ``dimensions``, an image model's ``size``, ``quality``, ``n``).
EMBEDDINGS_BUILT = built_keys({})
IMAGES_BUILT = built_keys(CHAT_OPTION_NAMES)


def _texts(message: Message) -> list[str]:
    content = message.content
    if isinstance(content, str):
        return [content]
    return [p.text for p in content if isinstance(p, TextPart)]


def build_embeddings_request(
    messages: Sequence[Message], *, model: str, options: ModelOptions | None = None
) -> dict[str, Any]:
    """Every text of the messages; a single text goes as a string, several as a list."""
    texts = [t for m in messages for t in _texts(m)]
    if not texts:
        raise ValueError("an embeddings request needs at least one text")
    body: dict[str, Any] = {"model": model, "input": texts[0] if len(texts) == 1 else texts}
    return with_extra(body, options.extra if options else {}, EMBEDDINGS_BUILT)


def parse_embeddings_response(body: dict[str, Any]) -> list[list[float]]:
    """One vector per input, in input order."""
    data = sorted(body.get("data") or [], key=lambda d: d.get("index", 0))
    return [list(d["embedding"]) for d in data]


def build_image_request(
    messages: Sequence[Message], *, model: str, options: ModelOptions | None = None
) -> dict[str, Any]:
    """The prompt is the first text of the last user message ("" when there is none)."""
    prompt = ""
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            texts = _texts(message)
            prompt = texts[0] if texts else ""
            break
    body = {"model": model, "prompt": prompt, **map_options(options, CHAT_OPTION_NAMES)}
    return with_extra(body, options.extra if options else {}, IMAGES_BUILT)


class GeneratedImage(BaseModel):
    model_config = ConfigDict(frozen=True)

    url: str | None = None
    b64_json: str | None = None
    revised_prompt: str | None = None


def parse_image_response(body: dict[str, Any]) -> list[GeneratedImage]:
    return [GeneratedImage.model_validate(d, strict=False) for d in body.get("data") or []]


# Embeddings and image generation as wire APIs: an agent whose endpoint names
# ``embeddings`` or ``images`` answers each turn with what that model makes.
#
# The reply is an assistant message whose text is JSON: ``{"embeddings": [[...], ...]}``,
# one vector per text of the conversation, or ``{"images": [{"url" | "b64_json",
# "revised_prompt"}]}`` for the last user message's prompt. Called as a sub-agent, that
# JSON is the tool's result. Neither streams, and neither takes tools.

IMAGES_PATH = "/images/generations"


def _usage(body: dict[str, Any]) -> Usage | None:
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return None
    given = int(usage.get("prompt_tokens") or usage.get("input_tokens") or 0)
    made = int(usage.get("completion_tokens") or usage.get("output_tokens") or 0)
    total = int(usage.get("total_tokens") or given + made)
    return Usage(prompt_tokens=given, completion_tokens=made, total_tokens=total)


def build_embeddings_turn(
    messages: Sequence[Message], *, model: str, options: ModelOptions | None = None, **_: Any
) -> dict[str, Any]:
    """Every text of the conversation (tools, schemas and streaming do not apply)."""
    return build_embeddings_request(messages, model=model, options=options)


def parse_embeddings_turn(body: dict[str, Any]) -> AssistantMessage:
    vectors = parse_embeddings_response(body)
    return AssistantMessage(
        content=json.dumps({"embeddings": vectors}),
        finish_reason="stop",
        usage=_usage(body),
    )


def build_image_turn(
    messages: Sequence[Message], *, model: str, options: ModelOptions | None = None, **_: Any
) -> dict[str, Any]:
    """The last user message's prompt, with the model's options (size, quality, n)."""
    return build_image_request(messages, model=model, options=options)


def parse_image_turn(body: dict[str, Any]) -> AssistantMessage:
    images = [image.model_dump(exclude_none=True) for image in parse_image_response(body)]
    if not images:
        raise KeyError("data")  # a shape error: a failed attempt, as any other
    return AssistantMessage(
        content=json.dumps({"images": images}), finish_reason="stop", usage=_usage(body)
    )

