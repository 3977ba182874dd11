"""OpenAI Responses API: input items, flat tools, ``text.format``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durable_agent._wire.codecs.common import (
    HostedCatalogue,
    StreamAccumulator,
    UnsupportedContentError,
    built_keys,
    chosen_tool,
    compact_json,
    error_text,
    finish_message,
    flat_reasoning,
    map_options,
    pieces,
    reply_usage,
    strict_schema,
    unique_call_ids,
    usage_from,
    wire_parameters,
    with_extra,
)
from durable_agent._wire.messages import (
    AssistantMessage,
    AudioPart,
    CompactionPart,
    FilePart,
    FunctionCall,
    ImagePart,
    Message,
    ProviderItems,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
    text_of,
)
from durable_agent._wire.options import ModelOptions, ProviderCompaction
from durable_agent._wire.outgoing import PartKind, prepare_request_messages

PATH = "/responses"
#: The request key its output-token cap goes in.
OUTPUT_CAP = "max_output_tokens"
#: The kinds of part besides text its requests carry (no audio).
TAKES: frozenset[PartKind] = frozenset({"image", "file"})

OPTION_NAMES = {
    "temperature": "temperature",
    "max_output_tokens": "max_output_tokens",
    "top_p": "top_p",
    "prompt_cache_key": "prompt_cache_key",
}

#: Every key this codec writes (``with_extra``): none of them comes from a spec's ``extra``.
BUILT = built_keys(OPTION_NAMES, "context_management")


def _part(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        if part.image_url is None:  # the provider's own file
            return {"type": "input_image", "file_id": part.file_id, "detail": "auto"}
        return {
            "type": "input_image",
            "image_url": part.image_url.url,
            "detail": part.image_url.detail or "auto",
        }
    if isinstance(part, FilePart):
        return {"type": "input_file", **part.file.model_dump(exclude_none=True)}
    if isinstance(part, AudioPart):
        raise UnsupportedContentError(
            "the OpenAI Responses API takes no input_audio parts; use Chat Completions"
        )
    raise UnsupportedContentError(f"unsupported content part: {part!r}")


def _content(content: str | list[Any]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if len(content) == 1 and isinstance(content[0], TextPart):
        return content[0].text
    return [_part(p) for p in content]


def responses_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    # strict is always sent: the API defaults it to true when absent, which would make
    # a non-strict tool strict behind its author's back.
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": wire_parameters(tool),
            "strict": tool.strict,
        }
        for tool in tools
    ]


def ask_responses_json_object(body: dict[str, Any], schema: dict[str, Any]) -> None:
    """``text.format`` asking for a JSON object (the schema is in the instructions)."""
    body.setdefault("text", {})["format"] = {"type": "json_object"}


def build_responses_request(
    messages: Sequence[Message],
    *,
    model: str,
    tools: Sequence[ToolDefinition] = (),
    options: ModelOptions | None = None,
    output_schema: dict[str, Any] | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    prepared = prepare_request_messages(messages)
    call_ids, result_ids = unique_call_ids(prepared)
    leading = 0
    while leading < len(prepared) and isinstance(prepared[leading], SystemMessage):
        leading += 1
    instructions = "\n\n".join(text_of(m.content) for m in prepared[:leading])

    items: list[dict[str, Any]] = []
    for i, message in enumerate(prepared[leading:], start=leading):
        if isinstance(message, SystemMessage | UserMessage):
            items.append({"role": message.role, "content": _content(message.content)})
        elif isinstance(message, AssistantMessage):
            items.extend(compaction_items(message))
            if _own_items(message):
                items.extend(_own_items(message))
            else:
                if message.tool_calls and message.reasoning_details:
                    items.extend(
                        d for d in message.reasoning_details if d.get("type") == "reasoning"
                    )
                text = message.content or message.refusal or ""
                if text:
                    items.append({"role": "assistant", "content": text})
            for k, call in enumerate(message.tool_calls or ()):
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call_ids[(i, k)],
                        "name": call.function.name,
                        "arguments": call.function.arguments,
                    }
                )
        elif isinstance(message, ToolMessage):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": result_ids[i],
                    "output": message.content,
                }
            )

    body: dict[str, Any] = {"model": model}
    if instructions:
        body["instructions"] = instructions
    body["input"] = items
    body.update(map_options(options, OPTION_NAMES))
    hosted = hosted_entries(options)
    if tools or hosted:
        body["tools"] = [*responses_tools(tools), *hosted]
    if tools:
        choice, named = chosen_tool(options)
        if named is not None:
            body["tool_choice"] = {"type": "function", "name": named}
        elif choice is not None:
            body["tool_choice"] = choice
    if output_schema:
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": "structured_output",
                "strict": True,
                "schema": strict_schema(output_schema),
            }
        }
    if stream:
        body["stream"] = True
    return with_extra(body, options.extra if options else {}, BUILT)


# The provider's own compaction (an endpoint whose owner chose it): the request asks for
# it in ``context_management``, and the ``compaction`` item a response returns is sent
# back, verbatim and first, with the turn that brought it.


def ask_compaction(body: dict[str, Any], settings: ProviderCompaction) -> None:
    """Server-side compaction past the owner's threshold, in the create request itself
    (no separate ``/responses/compact`` call: one request, one reply, as every turn)."""
    entry = {"type": "compaction", "compact_threshold": settings.threshold_tokens}
    body["context_management"] = [entry]


def compaction_items(message: AssistantMessage) -> list[dict[str, Any]]:
    part = message.compaction
    return [part.item] if part is not None and part.api == "responses" else []


def _with_compaction(message: AssistantMessage, body: dict[str, Any]) -> AssistantMessage:
    found = [i for i in body.get("output") or [] if i.get("type") == "compaction"]
    if not found:
        return message
    part = CompactionPart(api="responses", item=found[-1])
    return message.model_copy(update={"compaction": part})


def _finish_reason(body: dict[str, Any], has_calls: bool) -> str | None:
    status = body.get("status")
    if status == "incomplete":
        reason = (body.get("incomplete_details") or {}).get("reason")
        return "length" if reason == "max_output_tokens" else "content_filter"
    if status == "completed":
        return "tool_calls" if has_calls else "stop"
    return None


def parse_responses_response(body: dict[str, Any]) -> AssistantMessage:
    """A whole Responses API response as one assistant message."""
    texts: list[str] = []
    refusals: list[str] = []
    calls: list[ToolCall] = []
    malformed: list[str] = []
    details: list[dict[str, Any]] = []
    hosted: dict[str, int] = {}
    saw_message = False
    for item in body.get("output") or []:
        kind = item.get("type")
        if kind == "message":
            saw_message = True
            for block in item.get("content") or []:
                if block.get("type") == "output_text":
                    texts.append(block.get("text", ""))
                elif block.get("type") == "refusal":
                    refusals.append(block.get("refusal", ""))
        elif kind == "function_call":
            name = item.get("name")
            if not isinstance(name, str) or not name:
                malformed.append(compact_json(item))
                continue
            call_id = item.get("call_id") or item.get("id") or f"call_{len(calls)}"
            calls.append(
                ToolCall(
                    id=call_id,
                    function=FunctionCall(name=name, arguments=item.get("arguments") or ""),
                )
            )
        elif kind == "reasoning":
            details.append(item)
        elif kind in HOSTED_ITEMS:
            hosted[kind[: -len("_call")]] = hosted.get(kind[: -len("_call")], 0) + 1
    if not saw_message and isinstance(body.get("output_text"), str):
        texts.append(body["output_text"])
    error = None
    if body.get("status") == "failed" or body.get("error"):
        error = error_text(body) if body.get("error") else "response failed"
    summaries = [
        {"text": s.get("text", "")}
        for d in details
        for s in (d.get("summary") or []) + (d.get("content") or [])
        if isinstance(s, dict)
    ]
    message = finish_message(
        content="".join(texts),
        tool_calls=calls,
        malformed=malformed,
        refusal="".join(refusals) or None,
        reasoning=flat_reasoning(summaries),
        reasoning_details=details or None,
        finish_reason=_finish_reason(body, bool(calls)),
        usage=usage_from(body.get("usage"), "input_tokens", "output_tokens"),
        error=error,
    )
    return _with_compaction(with_hosted_items(message, body.get("output") or [], hosted), body)


#: Events carrying reasoning text as it streams (the summary, or the raw text).
_REASONING_DELTAS = frozenset(
    {"response.reasoning_summary_text.delta", "response.reasoning_text.delta"}
)


class ResponsesStreamAccumulator(StreamAccumulator):
    """Responses API events: text deltas for display; the final response object is truth."""

    _end_marker = "response.completed"

    def __init__(self) -> None:
        super().__init__()
        self._text: list[str] = []
        self._final: dict[str, Any] | None = None

    def _on_chunk(self, event: str, data: dict[str, Any]) -> str:
        kind = data.get("type") or event
        if kind == "response.output_text.delta" and isinstance(data.get("delta"), str):
            self._text.append(data["delta"])
            return str(data["delta"])
        if kind in _REASONING_DELTAS and isinstance(data.get("delta"), str):
            self._reasoned(data["delta"])
        elif kind in ("response.completed", "response.incomplete"):
            self._final = data.get("response") or {}
            self.complete = True
        elif kind == "response.failed":
            self.fail(f"response failed: {error_text(data.get('response') or {})}")
        elif kind == "error":
            self.fail(f"provider error in stream: {error_text(data)}")
        return ""

    def _build(self, error: str | None) -> AssistantMessage:
        if error is None and self._final is not None:
            return parse_responses_response(self._final)
        return finish_message(content="".join(self._text), tool_calls=[], malformed=[], error=error)


# Hosted tools (``common.hosted_as_sent`` says how a spec's options are checked). A
# reply that used one keeps its output items, all but our own function calls, verbatim
# on the message (``provider_items``): the next request sends them back in their place,
# in their order, with the reasoning and the cited text they came with.

#: The hosted tools of this wire, and the options a spec may set on each.
HOSTED_TOOLS: HostedCatalogue = {
    "web_search": {
        "search_context_size": "any",
        "user_location": "any",
        "filters.allowed_domains": "narrower",
    },
    "file_search": {"vector_store_ids": "among", "max_num_results": "at_most"},
    "code_interpreter": {},
}
#: The output items of a hosted tool's call (each carries its result, or its status).
HOSTED_ITEMS = frozenset({"web_search_call", "file_search_call", "code_interpreter_call"})
WIRE = "responses"


def hosted_entries(options: ModelOptions | None) -> list[dict[str, Any]]:
    """The request's entries of the hosted tools (their options as the worker checked
    them against the owner's)."""
    if options is None:
        return []
    return [{"type": t.name, **t.options} for t in options.hosted_tools or ()]


def _own_items(message: AssistantMessage) -> list[dict[str, Any]]:
    items = message.provider_items
    return list(items.items) if items is not None and items.wire == WIRE else []


def with_hosted_items(
    message: AssistantMessage, output: list[dict[str, Any]], hosted: dict[str, int]
) -> AssistantMessage:
    """``message`` with its reply's items kept, and its hosted calls counted in its
    usage, when the reply used a hosted tool."""
    if not hosted or message.is_error:
        return message
    kept = [item for item in output if item.get("type") not in ("function_call", "compaction")]
    usage = (message.usage or Usage()).model_copy(update={"hosted_calls": hosted})
    return message.model_copy(
        update={"provider_items": ProviderItems(wire=WIRE, items=kept), "usage": usage}
    )


# --- a reply, as a server of this wire would send it (for scripted models) ----------


def responses_reply_body(message: AssistantMessage, model: str = "scripted") -> dict[str, Any]:
    """``message`` as a whole Responses API response."""
    output: list[dict[str, Any]] = compaction_items(message)
    if _own_items(message):  # a reply that used hosted tools: its items as they were
        output += _own_items(message)
    else:
        output += [d for d in message.reasoning_details or () if d.get("type") == "reasoning"]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "output_text", "text": message.content, "annotations": []})
    if message.refusal:
        blocks.append({"type": "refusal", "refusal": message.refusal})
    if blocks and not _own_items(message):
        said = {"type": "message", "id": "msg_scripted", "role": "assistant"}
        output.append({**said, "status": "completed", "content": blocks})
    for call in message.tool_calls or ():
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{call.id}",
                "call_id": call.id,
                "name": call.function.name,
                "arguments": call.function.arguments,
                "status": "completed",
            }
        )
    usage = reply_usage(message)
    cut = message.finish_reason == "length"
    return {
        "id": "resp_scripted",
        "object": "response",
        "model": model,
        "status": "incomplete" if cut else "completed",
        **({"incomplete_details": {"reason": "max_output_tokens"}} if cut else {}),
        "output": output,
        "usage": {
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "input_tokens_details": {"cached_tokens": usage.cached_tokens or 0},
        },
    }


def responses_reply_events(message: AssistantMessage, model: str = "scripted") -> list[Any]:
    """The events a server streams for ``message``: its text in pieces, then the whole
    response (which the stream's reader takes as the truth)."""
    body = responses_reply_body(message, model)
    started = {"type": "response.created", "response": {**body, "output": []}}
    hosted: list[dict[str, Any]] = []  # each hosted call as the API streams it, added then done
    for at, item in enumerate(body["output"]):
        if item.get("type") in HOSTED_ITEMS:
            kind, where = item["type"], {"output_index": at, "item_id": item.get("id")}
            hosted.append({"type": "response.output_item.added", "output_index": at, "item": item})
            hosted.append({"type": f"response.{kind}.in_progress", **where})
            hosted.append({"type": f"response.{kind}.completed", **where})
            hosted.append({"type": "response.output_item.done", "output_index": at, "item": item})
    deltas = [
        {"type": "response.output_text.delta", "delta": p} for p in pieces(message.content, 16)
    ]
    end = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    return [started, *hosted, *deltas, {"type": end, "response": body}]
