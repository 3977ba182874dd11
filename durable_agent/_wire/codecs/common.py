"""Pieces every codec shares: option mapping, ids, usage, reasoning, stream plumbing, the
JSON-schema projections of a tool's parameters (bound parameters, strict mode) and a
server-sent events parser."""

from __future__ import annotations

import codecs
import copy
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from durable_agent._errors import DurableAgentError, NotAllowed
from durable_agent._wire.messages import (
    AssistantMessage,
    FunctionCall,
    Message,
    ToolCall,
    ToolDefinition,
    Usage,
)
from durable_agent._wire.options import ModelOptions, NamedToolChoice
from durable_agent._wire.outgoing import call_positions

# JSON-schema projections shared by the codecs: bound parameters, strict mode.

def wire_parameters(tool: ToolDefinition) -> dict[str, Any]:
    """The tool's schema as the model sees it: bound parameters removed, strict applied."""
    schema = copy.deepcopy(tool.parameters)
    if tool.bound_parameters:
        properties = schema.get("properties", {})
        for name in tool.bound_parameters:
            properties.pop(name, None)
        if "required" in schema:
            schema["required"] = [r for r in schema["required"] if r not in tool.bound_parameters]
            if not schema["required"]:
                del schema["required"]
    return strict_schema(schema) if tool.strict else schema


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` that also takes ``null``, one level deep: an optional field pydantic
    already wrote as ``anyOf [X, null]`` stays as it is (OpenAI's SDK writes it so too),
    and its ``default: null`` goes (the null is the default now)."""
    if schema.get("default", ...) is None:
        schema = {k: v for k, v in schema.items() if k != "default"}
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]} if kind != "null" else schema
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    options = schema.get("anyOf")
    if isinstance(options, list):
        if any(isinstance(o, dict) and o.get("type") == "null" for o in options):
            return schema
        return {**schema, "anyOf": [*options, {"type": "null"}]}
    return {"anyOf": [schema, {"type": "null"}]}


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI strict mode: every object closed and fully required, optional fields nullable.

    Applied recursively (properties, items, $defs, anyOf), on a copy.
    """
    out = copy.deepcopy(schema)
    _make_strict(out)
    return out


def _make_strict(node: Any) -> None:
    if isinstance(node, list):
        for item in node:
            _make_strict(item)
        return
    if not isinstance(node, dict):
        return
    for key in ("items", "additionalItems", "not"):
        _make_strict(node.get(key))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        _make_strict(node.get(key))
    for key in ("$defs", "definitions"):
        for sub in (node.get(key) or {}).values():
            _make_strict(sub)
    properties = node.get("properties")
    is_object = node.get("type") == "object" or (
        isinstance(node.get("type"), list) and "object" in node["type"]
    )
    if properties is None and not is_object:
        return
    properties = properties or {}
    for sub in properties.values():
        _make_strict(sub)
    required = set(node.get("required", []))
    for name in list(properties):
        if name not in required:
            properties[name] = _nullable(properties[name])
    if is_object or properties:
        if properties:
            node["required"] = list(properties)
        node["additionalProperties"] = False


# Server-sent events, parsed incrementally from bytes split anywhere.
#
# Follows the WHATWG event-stream rules: ``\r\n``, ``\r`` or ``\n`` line ends,
# ``data`` lines joined with ``\n``, comments and unknown fields ignored, an
# event dispatched on a blank line. Splits inside a line or inside a UTF-8
# character are carried to the next chunk.

@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None


#: What ends a line in an event stream: CRLF, CR or LF, and nothing else.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class SSEDecoder:
    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Events completed by this chunk."""
        return self._lines(self._text.decode(chunk))

    def close(self) -> list[SSEEvent]:
        """Flush at end of stream. A trailing event without its blank line is dropped,
        as the standard says: it was never dispatched."""
        events = self._lines(self._text.decode(b"", final=True))
        if self._buffer:
            self._line(self._buffer)
            self._buffer = ""
        return events

    def _lines(self, text: str) -> list[SSEEvent]:
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the \n of a \r\n split across chunks
        self._pending_cr = False
        text = self._buffer + text
        events: list[SSEEvent] = []
        start = 0
        for brk in _LINE_BREAK.finditer(text):  # scanned in C, not a character at a time
            event = self._line(text[start : brk.start()])
            if event is not None:
                events.append(event)
            start = brk.end()
        self._pending_cr = text.endswith("\r") and start == len(text)
        self._buffer = text[start:]
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SSEEvent(data="\n".join(self._data), event=self._event or "message", id=self._id)
        self._data = []
        self._event = ""
        return event


def parse_sse(chunks: Iterable[bytes]) -> list[SSEEvent]:
    """All events of a whole byte stream given as chunks."""
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events


class UnsupportedContentError(DurableAgentError, ValueError):
    """A message holds content the target API cannot carry (it is never dropped silently)."""


def chosen_tool(options: ModelOptions | None) -> tuple[str | None, str | None]:
    """``tool_choice`` as (``auto``/``none``/``required``, the one tool it names)."""
    choice = options.tool_choice if options is not None else None
    if isinstance(choice, NamedToolChoice):
        return None, choice.name
    return choice, None


def map_options(options: ModelOptions | None, names: dict[str, str]) -> dict[str, Any]:
    """Options renamed for one API; unsupported ones left out (``extra``: ``with_extra``)."""
    if options is None:
        return {}
    mapped: dict[str, Any] = {}
    for ours, theirs in names.items():
        value = getattr(options, ours)
        if value is not None:
            mapped[theirs] = value
    return mapped


#: Keys every wire API's request is built from, whichever codec builds it: what model,
#: what it reads, what it may call, how it answers, how long, and which cache. A spec's
#: ``extra`` never sets one, whether this body carries it or not.
BUILT_EVERYWHERE = frozenset(
    {
        "model",
        "messages",
        "input",
        "prompt",
        "system",
        "instructions",
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "stream",
        "stream_options",
        "response_format",
        "text",
        "output_config",
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "prompt_cache_key",
        "cache_control",
    }
)


def built_keys(names: dict[str, str], *more: str) -> frozenset[str]:
    """What one codec builds: the keys every codec does, its option names, and ``more``."""
    return BUILT_EVERYWHERE | frozenset(names.values()) | frozenset(more)


def with_extra(
    body: dict[str, Any], extra: dict[str, Any], built: frozenset[str] = BUILT_EVERYWHERE
) -> dict[str, Any]:
    """``body`` with a spec's ``extra`` keys added; ``NotAllowed`` for a key the body
    already has or the codec builds (``built``): an option never replaces what the
    worker chose (the model, the messages, the tools, the limits)."""
    clash = sorted(k for k in extra if k in body or k in built or k in BUILT_EVERYWHERE)
    if clash:
        raise NotAllowed(
            f"model.options.extra[{clash[0]!r}]: the worker builds {clash[0]!r} itself, "
            "and no option replaces it; remove it from the spec"
        )
    return {**body, **extra}


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def unique_call_ids(
    messages: Sequence[Message], sanitize: Callable[[str], str] = lambda s: s
) -> tuple[dict[tuple[int, int], str], dict[int, str]]:
    """Ids unique across the conversation, for APIs that reject repeats.

    Returns (call ids keyed by (assistant index, call position), result ids keyed
    by tool message index). The first use of an id keeps it; a repeat gets a
    deterministic suffix. Results take the id of the call they answer by position.
    """
    seen: set[str] = set()
    call_ids: dict[tuple[int, int], str] = {}
    for i, message in enumerate(messages):
        if not isinstance(message, AssistantMessage) or not message.tool_calls:
            continue
        for k, call in enumerate(message.tool_calls):
            base = sanitize(call.id) or f"call_{i}_{k}"
            unique, n = base, 2
            while unique in seen:
                unique, n = f"{base}_{n}", n + 1
            seen.add(unique)
            call_ids[(i, k)] = unique
    result_ids = {index: call_ids[pos] for index, pos in call_positions(messages).items()}
    return call_ids, result_ids


_ANTHROPIC_ID = re.compile(r"[^a-zA-Z0-9_-]")


def anthropic_safe_id(call_id: str) -> str:
    return _ANTHROPIC_ID.sub("_", call_id)


def tool_calls_from_openai(raw_calls: Any) -> tuple[list[ToolCall], list[str]]:
    """Read OpenAI-shaped tool calls; unreadable ones are kept raw, never dropped."""
    calls: list[ToolCall] = []
    malformed: list[str] = []
    if not isinstance(raw_calls, list):
        return calls, malformed
    for position, raw in enumerate(raw_calls):
        function = raw.get("function") if isinstance(raw, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            malformed.append(compact_json(raw))
            continue
        arguments = function.get("arguments")  # type: ignore[union-attr]
        if arguments is None:
            arguments = ""
        elif not isinstance(arguments, str):
            arguments = compact_json(arguments)  # some servers send an object
        call_id = raw.get("id") if isinstance(raw.get("id"), str) else ""
        calls.append(
            ToolCall(
                id=call_id or f"call_{position}",
                function=FunctionCall(name=name, arguments=arguments),
            )
        )
    return calls, malformed


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_from(raw: Any, prompt: str, completion: str) -> Usage | None:
    """Normalise a usage object given the API's names for the two main counts."""
    if not isinstance(raw, dict):
        return None
    prompt_tokens = _int(raw.get(prompt)) or 0
    completion_tokens = _int(raw.get(completion)) or 0
    details_out = raw.get("completion_tokens_details") or raw.get("output_tokens_details") or {}
    details_in = raw.get("prompt_tokens_details") or raw.get("input_tokens_details") or {}
    cached = _int(details_in.get("cached_tokens")) if isinstance(details_in, dict) else None
    written = None
    if cached is None and (
        "cache_read_input_tokens" in raw or "cache_creation_input_tokens" in raw
    ):
        # Anthropic counts cache reads and writes apart from ``input_tokens``: the prompt
        # is all three, as OpenAI's ``prompt_tokens`` includes its cached tokens
        cached = _int(raw.get("cache_read_input_tokens")) or 0
        written = _int(raw.get("cache_creation_input_tokens")) or 0
        prompt_tokens += cached + written
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=_int(raw.get("total_tokens")) or prompt_tokens + completion_tokens,
        reasoning_tokens=(
            _int(details_out.get("reasoning_tokens")) if isinstance(details_out, dict) else None
        ),
        cached_tokens=cached,
        cache_write_tokens=written,
    )


def reply_usage(message: AssistantMessage) -> Usage:
    """The usage a rendered reply reports: the message's, else a small made-up one (a
    scripted model's reply costs something, as a real one does)."""
    return message.usage or Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)


def reply_finish(message: AssistantMessage) -> str:
    """The finish reason a rendered reply gives, in the message's own words."""
    return message.finish_reason or ("tool_calls" if message.tool_calls else "stop")


def pieces(text: str, size: int) -> list[str]:
    """``text`` cut in pieces of ``size`` characters, as a stream delivers it."""
    return [text[i : i + size] for i in range(0, len(text), size)] if text else []


def flat_reasoning(details: Sequence[dict[str, Any]]) -> str | None:
    """The human-readable view of structured reasoning blocks."""
    texts: list[str] = []
    for block in details:
        for key in ("text", "summary", "thinking"):
            value = block.get(key)
            if isinstance(value, str) and value:
                texts.append(value)
    return "\n".join(texts) if texts else None


def finish_message(
    *,
    content: str,
    tool_calls: list[ToolCall],
    malformed: list[str],
    refusal: str | None = None,
    reasoning: str | None = None,
    reasoning_details: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    usage: Usage | None = None,
    error: str | None = None,
    blank_is_error: bool = True,
) -> AssistantMessage:
    """Assemble the assistant message of a turn and decide whether the turn failed.

    A failed turn keeps its partial text but never carries tool calls (they could
    be incomplete); they are kept raw in ``malformed_tool_calls``.
    """
    if error is None and refusal:
        error = f"Model refused: {refusal}"
    if (
        error is None
        and blank_is_error
        and not content
        and not tool_calls
        and not reasoning
        and not reasoning_details
    ):
        error = "empty completion: the model returned no content and no tool calls"
    if error is not None and refusal is None and tool_calls:
        malformed = malformed + [c.model_dump_json() for c in tool_calls]
        tool_calls = []
    return AssistantMessage(
        content=content,
        tool_calls=tool_calls or None,
        refusal=refusal,
        reasoning=reasoning if reasoning else None,
        reasoning_details=reasoning_details or None,
        finish_reason=finish_reason,
        usage=usage,
        is_error=True if error is not None else None,
        error=error,
        malformed_tool_calls=malformed or None,
    )


#: What reading a provider's JSON raises when a field is not of the type its API says.
SHAPE_ERRORS = (TypeError, KeyError, IndexError, AttributeError, ValueError)


class StreamAccumulator:
    """Builds one assistant message from a provider's SSE events.

    ``add`` returns the text that event added (for live display and heartbeats);
    ``fail`` records a transport failure; ``finish`` returns the message, with
    ``is_error`` when the stream broke, came back blank or never completed.
    """

    def __init__(self) -> None:
        self.error: str | None = None
        self.complete = False
        self._new_reasoning: list[str] = []
        self.response_id: str | None = None
        """The provider's id for the response (for tracing), from the first event with one."""

    def take_reasoning(self) -> str:
        """The reasoning text the events since the last call added (for live display)."""
        text = "".join(self._new_reasoning)
        self._new_reasoning.clear()
        return text

    def _reasoned(self, text: str) -> None:
        if text:
            self._new_reasoning.append(text)

    def add(self, event: SSEEvent) -> str:
        if self.error is not None or self.complete:
            return ""
        if event.data.strip() == "[DONE]":
            self.complete = True
            return ""
        try:
            data = json.loads(event.data)
        except ValueError:
            self.fail(f"malformed JSON in stream chunk: {event.data[:200]!r}")
            return ""
        if not isinstance(data, dict):
            self.fail(f"unexpected stream chunk (not a JSON object): {event.data[:200]!r}")
            return ""
        if self.response_id is None:
            self.response_id = response_id_of(data)
        try:
            return self._on_chunk(event.event, data)
        except SHAPE_ERRORS as error:  # a field of an unexpected type: the turn failed
            self.fail(f"unexpected stream chunk shape ({error!r}): {event.data[:200]!r}")
            return ""

    def fail(self, reason: str) -> None:
        if self.error is None:
            self.error = reason

    def finish(self) -> AssistantMessage:
        # A refusal is the model's determinate answer; a missing end marker after it
        # does not turn it into a retryable transport failure.
        if self.error is None and not self.complete and not self._refused():
            self.error = f"stream ended before {self._end_marker}"
        try:
            return self._build(self.error)
        except SHAPE_ERRORS as error:  # the final event said the turn in a shape we cannot read
            reason = f"unexpected stream shape ({error!r})"
            return finish_message(content="", tool_calls=[], malformed=[], error=reason)

    _end_marker = "[DONE]"

    def _refused(self) -> bool:
        return False

    def _on_chunk(self, event: str, data: dict[str, Any]) -> str:
        raise NotImplementedError

    def _build(self, error: str | None) -> AssistantMessage:
        raise NotImplementedError


def response_id_of(data: dict[str, Any]) -> str | None:
    """The response id a chunk or a whole response carries: at the top (Chat Completions,
    Anthropic's whole message), under ``response`` (Responses) or ``message`` (Anthropic's
    ``message_start``)."""
    for holder in (data, data.get("response"), data.get("message")):
        if isinstance(holder, dict) and isinstance(holder.get("id"), str):
            return str(holder["id"])
    return None


def error_text(data: dict[str, Any]) -> str:
    """The message of a provider error object, whatever its nesting."""
    error = data.get("error", data)
    if isinstance(error, dict):
        message = error.get("message") or error.get("detail") or compact_json(error)
        kind = error.get("type") or error.get("code")
        return f"{kind}: {message}" if isinstance(kind, str) else str(message)
    return str(error)


# Hosted tools: the provider's own tools (web search, file search, code execution),
# which it runs inside one model call. Each wire lists those it has, and for each the
# options a spec may set (``HostedRule``) by their path in the tool's object (dots
# between keys). The owner's settings for a tool (``EndpointRules.hosted_tools``) are
# sent as they are; a spec's options go over them only where the rule lets them, so a
# spec can narrow what the owner allows and never widen it.

HostedRule = Literal["any", "narrower", "among", "wider", "at_most"]
"""``any``: any value; ``narrower``: a list within the owner's (none set: any list, as
allowed domains); ``among``: a list within the owner's (none set: nothing, as vector
stores, which name the owner's data); ``wider``: a list holding all the owner's
(blocked domains); ``at_most``: a number no larger than the owner's."""

HostedCatalogue = Mapping[str, Mapping[str, HostedRule]]
"""A wire's hosted tools, by type, each with the options a spec may set."""


def hosted_as_sent(
    name: str, asked: Mapping[str, Any], owner: Mapping[str, Any], rules: Mapping[str, HostedRule]
) -> tuple[dict[str, Any], list[str]]:
    """The tool object's fields as sent (the owner's settings, the spec's ``asked``
    options over them) and what is wrong with ``asked`` (each problem a sentence)."""
    sent = copy.deepcopy(dict(owner))
    problems: list[str] = []
    for path, value in _leaves(asked, rules):
        where = f"hosted_tools[{name!r}].options.{path}"
        rule = rules.get(path)
        own = _at(owner, path)
        if rule is None:
            settable = ", ".join(sorted(rules)) or "none"
            problems.append(
                f"{where}: a spec cannot set this option of {name!r} (it may set: "
                f"{settable}); remove it, or the endpoint's owner sets it in hosted_tools"
            )
            continue
        wrong = _outside(rule, value, own)
        if wrong:
            problems.append(f"{where}: {wrong}")
            continue
        _put(sent, path, value)
    return sent, problems


def _leaves(
    options: Mapping[str, Any], rules: Mapping[str, HostedRule], prefix: str = ""
) -> Iterable[tuple[str, Any]]:
    for key, value in options.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path not in rules:
            yield from _leaves(value, rules, f"{path}.")
        else:
            yield path, value


def _at(data: Mapping[str, Any], path: str) -> Any:
    value: Any = data
    for key in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _put(data: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        data = data.setdefault(key, {})
    data[last] = value


def _within(value: str, allowed: Iterable[str]) -> bool:
    # a domain under an allowed one is within it (docs.example.com under example.com)
    return any(value == a or value.endswith("." + a) for a in allowed)


def _outside(rule: HostedRule, value: Any, own: Any) -> str | None:
    """Why ``value`` is not allowed by ``rule`` over the owner's ``own`` (``None``: it is)."""
    if rule == "any":
        return None
    if rule == "at_most":
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return "give a whole number of at least 1"
        if isinstance(own, int) and value > own:
            return f"at most {own}, as the endpoint's owner set it"
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return "give a list of strings"
    owned = own if isinstance(own, list) else None
    if rule == "wider":
        missing = sorted(set(owned or ()) - set(value))
        return f"keep {', '.join(missing)}, which the endpoint's owner set" if missing else None
    if owned is None:
        if rule == "among":
            return "the endpoint's owner names none; it names them in hosted_tools"
        return None
    beyond = [v for v in value if not _within(v, owned)]
    if beyond:
        return (
            f"{', '.join(beyond)} beyond what the endpoint's owner allows "
            f"({', '.join(owned) or 'none'}); a spec may only narrow it"
        )
    return None
