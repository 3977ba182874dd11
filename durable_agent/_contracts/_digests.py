"""What a worker tells the workflow of the messages it hands over: each one's content
hash and size in a payload. In the transcript's version-2 hash chain (``transcript``) the
workflow then joins them to the array without encoding or hashing them itself, so a
20 MB tool result costs its task the decoding and nothing more."""

from __future__ import annotations

import json
from typing import Literal, TypeVar, cast

from pydantic import Field, model_validator

from durable_agent._wire._contract import Contract
from durable_agent._wire._messages import AssistantMessage, Message, ToolCall, ToolMessage
from durable_agent._wire._transcript import content_hash, json_digest, payload_bytes

AnyMessage = TypeVar("AnyMessage", bound=Message)

#: What one message's digest and size add to a page in a payload (a 32-character hash,
#: a number, their quotes and commas), counted against the page's budget.
DIGEST_BYTES = 48


class _Digested(Contract):
    """A message with what its worker worked out of it."""

    digest: str
    """``transcript.content_hash`` of ``message`` (a tool result's: the key its activity
    stored it by)."""
    size: int = Field(ge=0)
    """``transcript.payload_bytes`` of ``message``."""


class ToolReturn(_Digested):
    """``run_tool``'s result when the call asks for it (``ToolCallInput.digested``)."""

    message: ToolMessage


class ModelReturn(_Digested):
    """``call_model``'s result when the call asks for it (``ModelCallInput.digested``):
    a reply of thousands of calls or a long answer joins the array without the
    workflow encoding it."""

    message: AssistantMessage
    calls: int | None = None
    """The reply's number of tool calls, when ``message`` holds only the first of them
    (``ModelSetup.calls_per_page``): the rest are read with ``reply_calls``."""
    arguments_checked: bool | None = None
    """With ``calls``: every tool call's arguments are a JSON object (``arguments_problem``
    found none), so the workflow does not parse thousands of them again."""
    left_out: int | None = None
    """Messages the request left out to fit the context budget, when the call asked
    (``ModelCallInput.count_left_out``; unset: none)."""
    files_left_out: list[str] | None = None
    """What the request's markers said of each file or image it left out (the owner's
    limits or rules), counted where several said the same; unset: none."""


#: What a worker new to a session may lack of what a model call refers to.
Lack = Literal["setup", "transcript"]


class WorkerLacks(Contract):
    """``call_model``'s answer from a worker that has not seen the session (a fresh
    worker after a deploy or a crash, its store its own) when the call asks for it
    (``ModelCallInput.asks_again``): what the workflow sends again, the model setup,
    the whole transcript or both. A move between workers is no failure: no attempt is
    used, and nothing is logged as one."""

    lacks: list[Lack] = Field(min_length=1)


class TranscriptPage(Contract):
    """``load_transcript``'s result when the page asks for it
    (``LoadTranscriptInput.digested``): the messages, and each one's digest and size."""

    messages: list[Message]
    digests: list[str]
    sizes: list[int]
    calls: int | None = None
    """The last message's number of tool calls, when it holds only the first of them
    (``LoadTranscriptInput.calls_per_page``): the rest are read with ``reply_calls``."""

    @model_validator(mode="after")
    def _one_each(self) -> TranscriptPage:
        if not len(self.messages) == len(self.digests) == len(self.sizes):
            raise ValueError("a page needs one digest and one size per message")
        return self


class ReplyCallsInput(Contract):
    """Read tool calls ``start`` to ``stop`` of a message the workers' store keeps by its
    content hash (a model's reply or a page read back, cut to its first calls)."""

    key: str
    start: int = Field(ge=0)
    stop: int = Field(gt=0)


def arguments_problem(arguments: str) -> str | None:
    """What keeps a call's raw arguments from being a tool's input (empty ones are read
    as ``{}``), said as the end of a sentence; ``None``: nothing."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return "are not valid JSON"
    return None if isinstance(parsed, dict) else "are not a JSON object"


def arguments_checked(message: AssistantMessage) -> bool | None:
    """``True`` when the message has tool calls and ``arguments_problem`` finds nothing
    in any of them (``None`` otherwise: the workflow looks for itself)."""
    calls = message.tool_calls
    if not calls or any(arguments_problem(c.function.arguments) for c in calls):
        return None
    return True


def first_calls(message: AnyMessage, most: int | None) -> tuple[AnyMessage, int | None]:
    """``message`` with at most ``most`` of its tool calls, and how many it has when it
    was cut (``None``: it is whole)."""
    calls = message.tool_calls if isinstance(message, AssistantMessage) else None
    if most is None or calls is None or len(calls) <= most:
        return message, None
    cut = message.model_copy(update={"tool_calls": calls[:most]})
    return cast(AnyMessage, cut), len(calls)  # (a copy is of its original's type)


def with_calls(message: AssistantMessage, calls: list[ToolCall]) -> AssistantMessage:
    """``message`` with ``calls`` for its tool calls (nothing validated or encoded)."""
    return message.model_copy(update={"tool_calls": calls})


def digested(message: Message, encoded: str | None = None) -> tuple[str, int]:
    """A message's content hash and payload size (``encoded``: its canonical JSON, when
    the caller has it, so it is not encoded again)."""
    digest = json_digest(encoded) if encoded is not None else content_hash(message)
    return digest, payload_bytes(message)
