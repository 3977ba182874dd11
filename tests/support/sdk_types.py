"""Validate request bodies against the official SDKs' request types (test-only).

The SDKs describe requests as TypedDicts; pydantic validates them once every
TypedDict is closed (unknown keys rejected) and every lazy ``Iterable`` consumed.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType
from typing import Any

from pydantic import ConfigDict, TypeAdapter
from typing_extensions import is_typeddict


def _close_typeddicts(package: ModuleType) -> None:
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            module = importlib.import_module(info.name)
        except Exception:
            continue
        for value in vars(module).values():
            if is_typeddict(value) and "__pydantic_config__" not in value.__dict__:
                value.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]


def _consume(value: Any) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _consume(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _consume(item)
    elif not isinstance(value, str | bytes | int | float | bool | type(None)):
        try:
            iterator = iter(value)
        except TypeError:
            return
        for item in iterator:  # validates lazily-checked Iterable fields
            _consume(item)


@functools.cache
def _adapter(name: str) -> TypeAdapter[Any]:
    if name == "chat":
        import openai.types
        from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

        _close_typeddicts(openai.types)
        return TypeAdapter(CompletionCreateParamsNonStreaming)
    if name == "responses":
        import openai.types
        from openai.types.responses.response_create_params import (
            ResponseCreateParamsNonStreaming,
        )

        _close_typeddicts(openai.types)
        return TypeAdapter(ResponseCreateParamsNonStreaming)
    import anthropic.types
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming

    _close_typeddicts(anthropic.types)
    return TypeAdapter(MessageCreateParamsNonStreaming)


def validate_request(api: str, body: dict[str, Any]) -> None:
    """Raise ``pydantic.ValidationError`` when ``body`` is not a valid request for ``api``."""
    _consume(_adapter(api).validate_python(body))
