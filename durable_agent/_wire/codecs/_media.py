"""OpenAI embeddings and image-generation requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from durable_agent._wire._messages import Message, TextPart, UserMessage
from durable_agent._wire._model_options import ModelOptions
from durable_agent._wire.codecs._chat import OPTION_NAMES as CHAT_OPTION_NAMES
from durable_agent._wire.codecs._common import built_keys, map_options, with_extra

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
