"""Embeddings and image generation as wire APIs: an agent whose endpoint names
``embeddings`` or ``images`` answers each turn with what that model makes.

The reply is an assistant message whose text is JSON: ``{"embeddings": [[...], ...]}``,
one vector per text of the conversation, or ``{"images": [{"url" | "b64_json",
"revised_prompt"}]}`` for the last user message's prompt. Called as a sub-agent, that
JSON is the tool's result. Neither streams, and neither takes tools.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from durable_agent._wire._messages import AssistantMessage, Message, Usage
from durable_agent._wire._model_options import ModelOptions
from durable_agent._wire.codecs._media import (
    EMBEDDINGS_PATH,
    build_embeddings_request,
    build_image_request,
    parse_embeddings_response,
    parse_image_response,
)

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


__all__ = [
    "EMBEDDINGS_PATH",
    "IMAGES_PATH",
    "build_embeddings_turn",
    "build_image_turn",
    "parse_embeddings_turn",
    "parse_image_turn",
]
