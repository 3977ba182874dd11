"""``prepare_request_messages``: the one place the outgoing array is shaped.

Storage keeps every message whole; what a provider receives is derived here,
once, for every codec: the window after flushes and compaction summaries, messages
a guardrail blocked left out, rescue messages as the user's words, the context
budget, pairing repaired, failed turns left out, and the reasoning rule applied
(the wire-format guide's "Interleaved Thinking"). Preparing a prepared array changes nothing.

Two of those steps have sections of their own below: pairing tool results with tool
calls by position, and fitting a request to what the model takes (images, audio, files,
and how structured output is asked for).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from durable_agent._wire.context import ContextRules, fit_to_budget, is_summary, request_window
from durable_agent._wire.messages import (
    AssistantMessage,
    AudioPart,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    ResqueMessage,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from durable_agent._wire.options import ModelOptions

# Pairing tool results with tool calls by position, never by id.
#
# Providers reuse ids (every call ``call_0``, every turn), so a result is paired
# by order: the tool messages that directly follow an assistant turn answer its
# calls one by one, result k answering call k.

#: Text of the result inserted for a call that has none, so the wire stays paired.
MISSING_RESULT_TEXT = "Error: this tool call was not executed; no result was recorded."


@dataclass(frozen=True)
class ToolExchange:
    """One assistant turn's calls and the results that answer them, position by position."""

    assistant_index: int
    calls: tuple[ToolCall, ...]
    results: tuple[ToolMessage | None, ...]
    """``results[k]`` answers ``calls[k]``; ``None`` marks a dangling call."""
    result_indices: tuple[int, ...]
    """Array indices of the results present, in order."""

    @property
    def dangling(self) -> tuple[int, ...]:
        return tuple(k for k, r in enumerate(self.results) if r is None)


@dataclass(frozen=True)
class PairingReport:
    exchanges: tuple[ToolExchange, ...]
    orphan_indices: tuple[int, ...]
    """Tool messages that answer no call (no preceding tool-call turn, or one too many)."""

    @property
    def is_paired(self) -> bool:
        return not self.orphan_indices and all(not e.dangling for e in self.exchanges)


def pair_tool_results(messages: Sequence[Message]) -> PairingReport:
    exchanges: list[ToolExchange] = []
    orphans: list[int] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if isinstance(message, ToolMessage):
            orphans.append(i)  # not preceded by a tool-call turn
            i += 1
            continue
        if not (isinstance(message, AssistantMessage) and message.tool_calls):
            i += 1
            continue
        calls = tuple(message.tool_calls)
        run_start = i + 1
        run_end = run_start
        while run_end < len(messages) and isinstance(messages[run_end], ToolMessage):
            run_end += 1
        run = list(range(run_start, run_end))
        answered = run[: len(calls)]
        orphans.extend(run[len(calls) :])
        results: list[ToolMessage | None] = [messages[j] for j in answered]  # type: ignore[misc]
        results.extend([None] * (len(calls) - len(answered)))
        exchanges.append(
            ToolExchange(
                assistant_index=i,
                calls=calls,
                results=tuple(results),
                result_indices=tuple(answered),
            )
        )
        i = run_end
    return PairingReport(exchanges=tuple(exchanges), orphan_indices=tuple(orphans))


def repair_pairing(messages: Sequence[Message]) -> list[Message]:
    """A fresh array in which every call has exactly one result directly after its turn.

    Orphan results are dropped; a dangling call gets an error result, so a
    provider never sees a call without an answer or an answer without a call.
    """
    report = pair_tool_results(messages)
    if report.is_paired:
        return list(messages)
    orphans = set(report.orphan_indices)
    missing_after: dict[int, list[ToolMessage]] = {}
    for exchange in report.exchanges:
        if not exchange.dangling:
            continue
        last = exchange.result_indices[-1] if exchange.result_indices else exchange.assistant_index
        missing_after[last] = [
            ToolMessage(
                tool_call_id=exchange.calls[k].id,
                content=MISSING_RESULT_TEXT,
                tool_name=exchange.calls[k].function.name,
                is_error=True,
            )
            for k in exchange.dangling
        ]
    repaired: list[Message] = []
    for index, message in enumerate(messages):
        if index not in orphans:
            repaired.append(message)
        repaired.extend(missing_after.get(index, ()))
    return repaired


def call_positions(messages: Sequence[Message]) -> dict[int, tuple[int, int]]:
    """Map each paired tool message's index to (assistant index, call position)."""
    positions: dict[int, tuple[int, int]] = {}
    for exchange in pair_tool_results(messages).exchanges:
        for k, index in enumerate(exchange.result_indices):
            positions[index] = (exchange.assistant_index, k)
    return positions


def _is_failed_turn(message: Message) -> bool:
    # A turn whose stream broke or came back blank never came whole from the model.
    # A refusal did, so it stays.
    return (
        isinstance(message, AssistantMessage)
        and bool(message.is_error)
        and not message.tool_calls
        and message.refusal is None
    )


def apply_reasoning_rule(message: AssistantMessage) -> AssistantMessage:
    """Keep reasoning on tool-call turns (providers require it there), hosted tool calls
    included; drop it elsewhere."""
    if message.tool_calls or message.provider_items:
        return message
    if message.reasoning is None and message.reasoning_details is None:
        return message
    return message.model_copy(update={"reasoning": None, "reasoning_details": None})


def _as_sent(message: Message) -> Message | None:
    """A message as a model may see it: blocked ones not at all; a rescue's corrective
    text as the user's (every API has a user role; none has ``resque``)."""
    if isinstance(message, UserMessage | AssistantMessage) and message.blocked is not None:
        return None
    if isinstance(message, ResqueMessage):
        if message.strategy != "correct":
            return None
        return UserMessage(content=message.content, mode="tool")
    return message


class PreparedMessages(list[Message]):
    """An array ``prepare_request_messages`` shaped: preparing it again (for the same
    context budget, or none) returns it as it is, so a model call shapes its request
    once however many layers (the activity, the codec, its builder) ask for it."""

    def __init__(
        self, messages: Sequence[Message], context: ContextRules | None, left_out: int
    ) -> None:
        super().__init__(messages)
        self.context = context
        self.left_out = left_out
        """Messages the context budget left out (0 without a budget)."""


def prepare_request_messages(
    messages: Sequence[Message], context: ContextRules | None = None
) -> PreparedMessages:
    """A fresh array ready for any codec; the input is not modified."""
    if isinstance(messages, PreparedMessages) and context in (None, messages.context):
        return messages
    window = [m for m in map(_as_sent, request_window(messages)) if m is not None]
    left_out = 0
    if context is not None:
        fitted = fit_to_budget(window, context)
        kept = {id(m) for m in fitted}
        left_out = sum(1 for m in window if id(m) not in kept and not _is_failed_turn(m))
        window = fitted
    prepared: list[Message] = []
    for message in repair_pairing([m for m in window if not _is_failed_turn(m)]):
        if isinstance(message, AssistantMessage):
            message = apply_reasoning_rule(message)
        prepared.append(message)
    return PreparedMessages(prepared, context, left_out)


# The provider's own parts in the array: its compaction item is sent back only to the
# endpoint that made it, in place of what it replaced, and so are its hosted tools' items
# (in their turn's place).
#
# An assistant message may carry the ``compaction`` part its provider returned. For a
# request to that endpoint the window starts at the latest such message (Anthropic's
# at the user turn before it: its requests start with the user, and its server drops
# what comes before the block); the system messages stay. A request to any other
# endpoint carries no part at all and starts where it would without them: the whole
# window, which the session's own rules (its budget, its summaries) cut as they always
# do. Own summaries keep counting positions in the array, so a summary after the cut is
# moved by as many positions as the cut left out, and one that covers less is dropped.


def _made_by(api: str, endpoint: str | None, wire: str, made_at: str) -> bool:
    return wire == api and (endpoint is None or made_at == endpoint)


def for_endpoint(messages: Sequence[Message], api: str, endpoint: str | None) -> list[Message]:
    """The messages with every provider part another endpoint made left out (its
    compaction, its hosted tools' items; the text of those turns stays): one provider
    never receives another's, nor does another account at the same wire. With no
    endpoint known (a codec asked directly) the wire alone decides."""
    kept: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            update: dict[str, Any] = {}
            part, items = message.compaction, message.provider_items
            if part is not None and not _made_by(api, endpoint, part.api, part.endpoint):
                update["compaction"] = None
            if items is not None and not _made_by(api, endpoint, items.wire, items.endpoint):
                update["provider_items"] = None
            message = message.model_copy(update=update) if update else message
        kept.append(message)
    return kept


def compaction_window(messages: Sequence[Message], api: str, endpoint: str) -> list[Message]:
    """The array as a request to ``endpoint`` (of wire ``api``) starts from: the
    provider's parts of other endpoints taken off; before the latest compaction part of
    its own, only the system messages."""
    cleaned = for_endpoint(messages, api, endpoint)
    # what compaction parts are left are this endpoint's own
    own = [i for i, m in enumerate(cleaned) if isinstance(m, AssistantMessage) and m.compaction]
    latest = own[-1] if own else None
    if latest is None:
        return cleaned
    cut = latest
    if api == "anthropic":
        while cut > 0 and not isinstance(cleaned[cut], UserMessage):
            cut -= 1
    head = [m for m in cleaned[:cut] if isinstance(m, SystemMessage) and not is_summary(m)]
    moved = cut - len(head)
    tail: list[Message] = []
    for message in cleaned[cut:]:
        if isinstance(message, SystemMessage) and message.compacts:
            if message.compacts <= cut:
                continue  # an own summary of less than the provider's item stands for
            message = message.model_copy(update={"compacts": message.compacts - moved})
        tail.append(message)
    return head + tail


def options_for_call(options: ModelOptions, messages: Sequence[Message]) -> ModelOptions:
    """``tool_choice`` ``required`` or a named tool binds the first model call of a turn
    only: once tools have run since the latest user message the model may answer
    (``auto``), or the loop could never end. (The OpenAI Agents SDK does the same.)"""
    if options.tool_choice in (None, "auto", "none"):
        return options
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            return options.model_copy(update={"tool_choice": None})
        if isinstance(message, UserMessage):
            break
    return options


# What a model takes (images, audio, files), and fitting a request to it.
#
# A model that takes no images (or audio, or files) must not fail a session because a
# person sent one: the part is left out of the request with a visible marker in its
# place (the array keeps it whole), or, when the spec says so, the message is refused
# as it is sent. The wire limits what any model behind it takes too (each codec says
# what its wire carries: ``Codec.takes``).
#
# How structured output is asked for is the endpoint's choice as well: ``json_schema``
# (OpenAI's strict ``response_format``), ``json_object`` (the form llama.cpp's server and
# others take: ``{"type": "json_object", "schema": ...}``), or ``instructions`` (no
# request field: the schema goes in a system message, and the answer is validated and
# rescued as any other).

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
    """How an ``output_schema`` is asked for (see this section's opening words)."""

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
