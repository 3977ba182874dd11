"""OpenAI Chat Completions, the reference wire.

Works with any compatible server (vLLM, Together, Groq, Fireworks, DeepSeek,
OpenRouter, llama.cpp): the reasoning field on egress is set per provider by
:class:`ReasoningWire`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durable_agent._wire.codecs.common import (
    StreamAccumulator,
    built_keys,
    chosen_tool,
    error_text,
    finish_message,
    flat_reasoning,
    map_options,
    pieces,
    reply_finish,
    reply_usage,
    strict_schema,
    tool_calls_from_openai,
    usage_from,
    wire_parameters,
    with_extra,
)
from durable_agent._wire.messages import (
    LOCAL_EXTENSIONS,
    PROVIDER_FIELDS,
    REASONING_FIELDS,
    AssistantMessage,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolDefinition,
    UserMessage,
)
from durable_agent._wire.options import ModelOptions, ReasoningWire
from durable_agent._wire.outgoing import PartKind, prepare_request_messages

PATH = "/chat/completions"
#: The request key its output-token cap goes in.
OUTPUT_CAP = "max_completion_tokens"
#: The kinds of part besides text its requests carry.
TAKES: frozenset[PartKind] = frozenset({"image", "audio", "file"})

OPTION_NAMES = {
    "temperature": "temperature",
    "max_output_tokens": "max_completion_tokens",  # not the deprecated max_tokens
    "top_p": "top_p",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
    "stop": "stop",
    "seed": "seed",
    "prompt_cache_key": "prompt_cache_key",
}

#: Every key this codec writes (``with_extra``): none of them comes from a spec's ``extra``.
BUILT = built_keys(OPTION_NAMES)

_DROP_ON_EGRESS = LOCAL_EXTENSIONS | REASONING_FIELDS | PROVIDER_FIELDS

#: Chat Completions carries a file inline or by id, never by URL. The worker sends inline
#: each file its owner lets it fetch (this codec says ``takes_file_urls=False``); any
#: other file by URL is left out with this marker, so the model knows. An image it
#: takes by URL only, never by a provider's file id.
FILE_BY_URL_LEFT_OUT = TextPart(text="[file omitted: Chat Completions takes no file by URL]")
IMAGE_BY_ID_LEFT_OUT = TextPart(text="[image omitted: Chat Completions takes no image by file id]")


def _left_out(part: ContentPart) -> TextPart | None:
    """The marker that stands for a part this wire cannot carry (``None``: it can)."""
    if isinstance(part, FilePart) and part.file.file_url and not part.file.file_data:
        return FILE_BY_URL_LEFT_OUT
    if isinstance(part, ImagePart) and part.image_url is None:
        return IMAGE_BY_ID_LEFT_OUT
    return None


def chat_message(message: Message, reasoning: ReasoningWire) -> dict[str, Any]:
    """One prepared message in Chat Completions form."""
    if isinstance(message, UserMessage) and isinstance(message.content, list):
        parts = message.content
        if any(_left_out(part) for part in parts):
            kept = [_left_out(p) or p for p in parts]
            message = message.model_copy(update={"content": kept})
    wire = message.model_dump(mode="json", exclude_none=True, exclude=set(_DROP_ON_EGRESS))
    if isinstance(message, UserMessage | SystemMessage):
        content = message.content
        if isinstance(content, list) and len(content) == 1 and isinstance(content[0], TextPart):
            wire["content"] = content[0].text  # single text part -> plain string
    if isinstance(message, AssistantMessage) and message.tool_calls:
        wire.update(reasoning_fields(message, reasoning))
    return wire


def reasoning_fields(message: AssistantMessage, policy: ReasoningWire) -> dict[str, Any]:
    """The reasoning to resend with a tool-call turn: verbatim details or the flat string."""
    if message.reasoning_details and policy.send_details:
        return {"reasoning_details": message.reasoning_details}
    if policy.field is None:
        return {}
    if message.reasoning or policy.send_empty:
        return {policy.field: message.reasoning or ""}
    return {}


def chat_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    wire = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name, "description": tool.description}
        if tool.strict:
            function["strict"] = True
        function["parameters"] = wire_parameters(tool)
        wire.append({"type": "function", "function": function})
    return wire


def response_format(schema: dict[str, Any], name: str = "structured_output") -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "strict": True, "schema": strict_schema(schema)},
    }


def ask_chat_json_object(body: dict[str, Any], schema: dict[str, Any]) -> None:
    """``response_format`` as llama.cpp's server and others take a JSON object."""
    body["response_format"] = {"type": "json_object", "schema": schema}


def build_chat_request(
    messages: Sequence[Message],
    *,
    model: str,
    tools: Sequence[ToolDefinition] = (),
    options: ModelOptions | None = None,
    output_schema: dict[str, Any] | None = None,
    reasoning: ReasoningWire | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    policy = reasoning or ReasoningWire()
    body: dict[str, Any] = {
        "model": model,
        "messages": [chat_message(m, policy) for m in prepare_request_messages(messages)],
        **map_options(options, OPTION_NAMES),
    }
    if tools:
        body["tools"] = chat_tools(tools)
        choice, named = chosen_tool(options)
        if named is not None:
            body["tool_choice"] = {"type": "function", "function": {"name": named}}
        elif choice is not None:
            body["tool_choice"] = choice
    if output_schema:
        body["response_format"] = response_format(output_schema)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return with_extra(body, options.extra if options else {}, BUILT)


def _reasoning_text(source: dict[str, Any]) -> str | None:
    # vLLM / OpenAI-style "reasoning", DeepSeek "reasoning_content": read either, one per source.
    for key in ("reasoning", "reasoning_content"):
        value = source.get(key)
        if isinstance(value, str):
            return value
    return None


def parse_chat_completion(body: dict[str, Any]) -> AssistantMessage:
    """A whole (non-streamed) chat completion as one assistant message."""
    if "error" in body and not body.get("choices"):
        return finish_message(content="", tool_calls=[], malformed=[], error=error_text(body))
    choices = body.get("choices") or []
    if not choices:
        return finish_message(
            content="", tool_calls=[], malformed=[], error="response has no choices"
        )
    choice = choices[0]
    message = choice.get("message") or {}
    calls, malformed = tool_calls_from_openai(message.get("tool_calls"))
    details = message.get("reasoning_details")
    details = details if isinstance(details, list) and details else None
    reasoning = _reasoning_text(message)
    if reasoning is None and details:
        reasoning = flat_reasoning(details)
    content = message.get("content")
    return finish_message(
        content=content if isinstance(content, str) else "",
        tool_calls=calls,
        malformed=malformed,
        refusal=message.get("refusal") or None,
        reasoning=reasoning,
        reasoning_details=details,
        finish_reason=choice.get("finish_reason"),
        usage=usage_from(body.get("usage"), "prompt_tokens", "completion_tokens"),
    )


class ChatStreamAccumulator(StreamAccumulator):
    """Chat Completions SSE chunks: deltas accumulated by choice-0, tool calls by index."""

    def __init__(self) -> None:
        super().__init__()
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._details: dict[int, dict[str, Any]] = {}
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None

    def _on_chunk(self, event: str, data: dict[str, Any]) -> str:
        if "error" in data and not data.get("choices"):
            self.fail(f"provider error in stream: {error_text(data)}")
            return ""
        if isinstance(data.get("usage"), dict):
            self._usage = data["usage"]
        text = ""
        for choice in data.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text += delta["content"]
            if isinstance(delta.get("refusal"), str):
                self._refusal.append(delta["refusal"])
            reasoning = _reasoning_text(delta)
            if reasoning:
                self._reasoning.append(reasoning)
                self._reasoned(reasoning)
            self._add_details(delta.get("reasoning_details"))
            self._add_tool_calls(delta.get("tool_calls"))
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        self._content.append(text)
        return text

    def _refused(self) -> bool:
        return bool(self._refusal)

    def _add_tool_calls(self, fragments: Any) -> None:
        if not isinstance(fragments, list):
            return
        for fragment in fragments:
            if not isinstance(fragment, dict):
                continue
            index = fragment.get("index")
            if not isinstance(index, int):
                # No index: a new id starts a new call; otherwise it continues the last one.
                last = max(self._calls) if self._calls else None
                new_id = fragment.get("id")
                if last is None or (new_id and self._calls[last]["id"] not in ("", new_id)):
                    index = 0 if last is None else last + 1
                else:
                    index = last
            call = self._calls.setdefault(index, {"id": "", "name": "", "arguments": []})
            if isinstance(fragment.get("id"), str) and fragment["id"] and not call["id"]:
                call["id"] = fragment["id"]
            function = fragment.get("function") or {}
            name = function.get("name")
            if isinstance(name, str) and name and not call["name"]:
                call["name"] = name
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call["arguments"].append(arguments)

    def _add_details(self, fragments: Any) -> None:
        if not isinstance(fragments, list):
            return
        for fragment in fragments:
            if not isinstance(fragment, dict):
                continue
            index = fragment.get("index")
            if not isinstance(index, int):
                index = len(self._details)
            block = self._details.setdefault(index, {})
            for key, value in fragment.items():
                if key in ("text", "summary") and isinstance(value, str):
                    block[key] = block.get(key, "") + value
                elif key == "signature" and value:
                    block[key] = value
                elif key not in block or block[key] is None:
                    block[key] = value  # encrypted data and ids stay opaque

    def _build(self, error: str | None) -> AssistantMessage:
        raw_calls = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": "".join(c["arguments"])},
            }
            for _, c in sorted(self._calls.items())
        ]
        calls, malformed = tool_calls_from_openai(raw_calls)
        details = [block for _, block in sorted(self._details.items())] or None
        reasoning = "".join(self._reasoning) or (flat_reasoning(details) if details else None)
        return finish_message(
            content="".join(self._content),
            tool_calls=calls,
            malformed=malformed,
            refusal="".join(self._refusal) or None,
            reasoning=reasoning,
            reasoning_details=details,
            finish_reason=self._finish_reason,
            usage=usage_from(self._usage, "prompt_tokens", "completion_tokens"),
            error=error,
        )


# --- a reply, as a server of this wire would send it (for scripted models) ----------


def _reply_usage(message: AssistantMessage) -> dict[str, Any]:
    usage = reply_usage(message)
    said: dict[str, Any] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }
    if usage.cached_tokens is not None:  # as OpenAI reports what its cache served
        said["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return said


def chat_reply_body(message: AssistantMessage, model: str = "scripted") -> dict[str, Any]:
    """``message`` as a whole Chat Completions response."""
    wire: dict[str, Any] = {"role": "assistant", "content": message.content or None}
    if message.tool_calls:
        wire["tool_calls"] = [c.model_dump(mode="json") for c in message.tool_calls]
    if message.reasoning is not None:
        wire["reasoning_content"] = message.reasoning
    if message.reasoning_details is not None:
        wire["reasoning_details"] = message.reasoning_details
    if message.refusal is not None:
        wire["refusal"] = message.refusal
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": wire, "finish_reason": reply_finish(message)}],
        "usage": _reply_usage(message),
    }


def chat_reply_events(message: AssistantMessage, model: str = "scripted") -> list[Any]:
    """The chunks a server streams for ``message``: text and arguments in pieces, then
    the usage and ``[DONE]``."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events: list[Any] = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"reasoning_content": p}) for p in pieces(message.reasoning or "", 16)]
    events += [chunk({"content": p}) for p in pieces(message.content, 16)]
    if message.refusal:
        events.append(chunk({"refusal": message.refusal}))
    for index, call in enumerate(message.tool_calls or ()):
        function = {"name": call.function.name, "arguments": ""}
        start = {"index": index, "id": call.id, "type": "function", "function": function}
        events.append(chunk({"tool_calls": [start]}))
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": p}}]})
            for p in pieces(call.function.arguments, 8)
        ]
    events.append(chunk({}, reply_finish(message)))
    usage = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "choices": []}
    events.append({**usage, "usage": _reply_usage(message)})
    events.append("[DONE]")
    return events
