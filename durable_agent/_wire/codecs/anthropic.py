"""Anthropic Messages API.

Top-level ``system``; content always as block arrays; ``tool_use`` blocks on the
assistant turn and every ``tool_result`` of one batch in one user turn; thinking
blocks resent verbatim on tool-call turns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from durable_agent._wire.codecs.common import (
    HostedCatalogue,
    HostedRule,
    StreamAccumulator,
    UnsupportedContentError,
    anthropic_safe_id,
    built_keys,
    chosen_tool,
    compact_json,
    error_text,
    finish_message,
    flat_reasoning,
    map_options,
    pieces,
    reply_finish,
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

PATH = "/messages"
#: The request key its output-token cap goes in.
OUTPUT_CAP = "max_tokens"
#: The kinds of part besides text its requests carry (no audio).
TAKES: frozenset[PartKind] = frozenset({"image", "file"})
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096

OPTION_NAMES = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "stop": "stop_sequences",
}

#: Every key this codec writes (``with_extra``): none of them comes from a spec's ``extra``.
BUILT = built_keys(OPTION_NAMES, "context_management")

_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}


def _split_data_url(url: str) -> tuple[str, str] | None:
    if not url.startswith("data:") or ";base64," not in url:
        return None
    header, data = url[len("data:") :].split(";base64,", 1)
    return header, data


def _part(part: Any) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        if part.image_url is None:  # a file of the Files API (its beta header: the endpoint's)
            return {"type": "image", "source": {"type": "file", "file_id": part.file_id}}
        inline = _split_data_url(part.image_url.url)
        if inline:
            media_type, data = inline
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data},
            }
        return {"type": "image", "source": {"type": "url", "url": part.image_url.url}}
    if isinstance(part, FilePart):
        if part.file.file_url:
            return {"type": "document", "source": {"type": "url", "url": part.file.file_url}}
        if part.file.file_id:
            return {"type": "document", "source": {"type": "file", "file_id": part.file.file_id}}
        inline = _split_data_url(part.file.file_data or "")
        if inline:
            media_type, data = inline
            return {
                "type": "document",
                "source": {"type": "base64", "media_type": media_type, "data": data},
            }
        raise UnsupportedContentError(
            "a file part needs file_data (a data: URL), file_id or file_url"
        )
    if isinstance(part, AudioPart):
        raise UnsupportedContentError("the Anthropic Messages API takes no audio input")
    raise UnsupportedContentError(f"unsupported content part: {part!r}")


def _blocks(content: str | list[Any]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [_part(p) for p in content]


def _tool_input(arguments: str) -> dict[str, Any]:
    # Anthropic needs an object; malformed arguments (already answered with an error
    # result by the tool activity) go as an empty one.
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


#: A tool whose schema names one of Anthropic's own tool types, and which carries that
#: type's name, goes as that type (the memory tool: ``memory_20250818``, named ``memory``).
NATIVE = "x-durable-agent-native"
NATIVE_NAMES = {"memory_20250818": "memory"}


def anthropic_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    wire = []
    for tool in tools:
        native = tool.parameters.get(NATIVE)
        if native in NATIVE_NAMES and tool.name == NATIVE_NAMES[native]:
            wire.append({"type": native, "name": tool.name})
            continue
        entry: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "input_schema": wire_parameters(tool),
        }
        if tool.strict:
            entry["strict"] = True
        wire.append(entry)
    return wire


def build_anthropic_request(
    messages: Sequence[Message],
    *,
    model: str,
    tools: Sequence[ToolDefinition] = (),
    options: ModelOptions | None = None,
    output_schema: dict[str, Any] | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    prepared = prepare_request_messages(messages)
    call_ids, result_ids = unique_call_ids(prepared, sanitize=anthropic_safe_id)
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)  # consecutive same-role turns merge
        else:
            turns.append({"role": role, "content": blocks})

    for i, message in enumerate(prepared):
        if isinstance(message, SystemMessage):
            system.append(text_of(message.content))
        elif isinstance(message, UserMessage):
            add("user", _blocks(message.content))
        elif isinstance(message, AssistantMessage):
            blocks: list[dict[str, Any]] = compaction_blocks(message) + _own_blocks(message)
            if not _own_blocks(message) and message.tool_calls and message.reasoning_details:
                blocks.extend(
                    d for d in message.reasoning_details if d.get("type") in _THINKING_BLOCKS
                )
            text = message.content or message.refusal or ""
            if text and not _own_blocks(message):
                blocks.append({"type": "text", "text": text})
            for k, call in enumerate(message.tool_calls or ()):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call_ids[(i, k)],
                        "name": call.function.name,
                        "input": _tool_input(call.function.arguments),
                    }
                )
            add("assistant", blocks)
        elif isinstance(message, ToolMessage):
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": result_ids[i],
                "content": message.content,
            }
            if message.is_error:
                result["is_error"] = True
            add("user", [result])

    body: dict[str, Any] = {"model": model}
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = turns
    body["max_tokens"] = (options.max_output_tokens if options else None) or DEFAULT_MAX_TOKENS
    body.update(map_options(options, OPTION_NAMES))
    hosted = hosted_entries(options)
    if tools or hosted:
        body["tools"] = [*anthropic_tools(tools), *hosted]
    if tools:
        choice, named = chosen_tool(options)
        if named is not None:
            body["tool_choice"] = {"type": "tool", "name": named}
        elif choice is not None:  # Anthropic says "any" for "required"
            body["tool_choice"] = {"type": {"required": "any"}.get(choice, choice)}
    if output_schema:
        body["output_config"] = {
            "format": {"type": "json_schema", "schema": strict_schema(output_schema)}
        }
    if stream:
        body["stream"] = True
    if options is not None and options.prompt_cache_key is not None:
        mark_cache_breakpoints(body)
    return with_extra(body, options.extra if options else {}, BUILT)


#: Anthropic's marker of a cache breakpoint: the prefix up to it is cached.
EPHEMERAL = {"type": "ephemeral"}


def mark_cache_breakpoints(body: dict[str, Any]) -> None:
    """Three of the four breakpoints the API allows: after the tools, after the
    instructions, and at the request's last block (the conversation so far, which the
    next request extends and so reads from the cache)."""
    tools = body.get("tools")
    if tools:
        tools[-1] = {**tools[-1], "cache_control": EPHEMERAL}
    system = body.get("system")
    if isinstance(system, str) and system:
        body["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    turns = body.get("messages") or []
    if turns and turns[-1]["content"]:
        blocks = turns[-1]["content"]
        last = blocks[-1]
        if last.get("type") not in _THINKING_BLOCKS:  # thinking blocks take no marker
            blocks[-1] = {**last, "cache_control": EPHEMERAL}


# The provider's own context management (an endpoint whose owner chose it): context
# editing clears old tool results and thinking on the server, and compaction summarises
# what came before into a ``compaction`` block, which later requests carry, verbatim and
# first, in the turn that brought it. Both are betas, named in the ``anthropic-beta``
# header of the endpoint's requests.

CONTEXT_EDITING_BETA = "context-management-2025-06-27"
COMPACTION_BETA = "compact-2026-01-12"


def _tokens(value: int) -> dict[str, Any]:
    return {"type": "input_tokens", "value": value}


def ask_context_management(body: dict[str, Any], settings: ProviderCompaction) -> None:
    """The edits the owner chose, in the order the API applies them (thinking first)."""
    edits: list[dict[str, Any]] = []
    if settings.keep_thinking_turns is not None:
        keep = {"type": "thinking_turns", "value": settings.keep_thinking_turns}
        edits.append({"type": "clear_thinking_20251015", "keep": keep})
    clear = settings.clear_tool_uses
    if clear is not None:
        edit = {
            "type": "clear_tool_uses_20250919",
            "trigger": _tokens(clear.trigger_tokens),
            "keep": {"type": "tool_uses", "value": clear.keep},
        }
        if clear.clear_at_least_tokens is not None:
            edit["clear_at_least"] = _tokens(clear.clear_at_least_tokens)
        edits.append(edit)
    if settings.summarize:
        edits.append({"type": "compact_20260112", "trigger": _tokens(settings.threshold_tokens)})
    if edits:
        body["context_management"] = {"edits": edits}


def context_management_betas(settings: ProviderCompaction) -> list[str]:
    """The betas the owner's settings need named in the ``anthropic-beta`` header."""
    betas = []
    if settings.keep_thinking_turns is not None or settings.clear_tool_uses is not None:
        betas.append(CONTEXT_EDITING_BETA)
    if settings.summarize:
        betas.append(COMPACTION_BETA)
    return betas


def compaction_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    part = message.compaction
    return [dict(part.item)] if part is not None and part.api == "anthropic" else []


def _managed(message: AssistantMessage, body: dict[str, Any]) -> AssistantMessage:
    """The reply with its compaction block kept, and the edits the server applied
    counted in its usage."""
    update: dict[str, Any] = {}
    found = [b for b in body.get("content") or [] if b.get("type") == "compaction"]
    if found:
        update["compaction"] = CompactionPart(api="anthropic", item=found[-1])
    edits = (body.get("context_management") or {}).get("applied_edits") or []
    if edits and message.usage is not None:
        cleared = sum(int(e.get("cleared_input_tokens") or 0) for e in edits)
        uses = sum(int(e.get("cleared_tool_uses") or 0) for e in edits)
        counts = {"cleared_input_tokens": cleared, "cleared_tool_uses": uses}
        update["usage"] = message.usage.model_copy(update=counts)
    return message.model_copy(update=update) if update else message


def parse_anthropic_message(body: dict[str, Any]) -> AssistantMessage:
    """A whole Messages API response as one assistant message."""
    if body.get("type") == "error":
        return finish_message(content="", tool_calls=[], malformed=[], error=error_text(body))
    texts: list[str] = []
    calls: list[ToolCall] = []
    malformed: list[str] = []
    details: list[dict[str, Any]] = []
    for block in body.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text", ""))
        elif kind == "tool_use":
            name = block.get("name")
            if not isinstance(name, str) or not name:
                malformed.append(compact_json(block))
                continue
            raw_input = block.get("input", {})
            arguments = raw_input if isinstance(raw_input, str) else compact_json(raw_input)
            calls.append(
                ToolCall(
                    id=block.get("id") or f"call_{len(calls)}",
                    function=FunctionCall(name=name, arguments=arguments),
                )
            )
        elif kind in _THINKING_BLOCKS:
            details.append(block)
    stop_reason = body.get("stop_reason")
    content = "".join(texts)
    refused = stop_reason == "refusal"
    message = finish_message(
        content="" if refused else content,
        tool_calls=calls,
        malformed=malformed,
        refusal=(content or "The model declined to answer.") if refused else None,
        reasoning=flat_reasoning(details),
        reasoning_details=details or None,
        finish_reason=_STOP_REASONS.get(stop_reason, stop_reason) if stop_reason else None,
        usage=usage_from(body.get("usage"), "input_tokens", "output_tokens"),
    )
    message = with_hosted_blocks(message, body.get("content") or [], body.get("usage"))
    message = _in_container(message, body.get("container"))
    return _managed(message, body)


class AnthropicStreamAccumulator(StreamAccumulator):
    """Messages API events, rebuilt into the whole message and parsed like one."""

    _end_marker = "message_stop"

    def __init__(self) -> None:
        super().__init__()
        self._message: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._usage: dict[str, Any] = {}

    def _on_chunk(self, event: str, data: dict[str, Any]) -> str:
        kind = data.get("type") or event
        if kind == "message_start":
            self._message = dict(data.get("message") or {})
            self._usage.update(self._message.get("usage") or {})
        elif kind == "content_block_start":
            block = dict(data.get("content_block") or {})
            if block.get("type") in _CALL_BLOCKS:
                block["input"] = {}
            self._blocks[int(data.get("index", len(self._blocks)))] = block
        elif kind == "content_block_delta":
            return self._delta(int(data.get("index", 0)), data.get("delta") or {})
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            if "stop_reason" in delta:
                self._message["stop_reason"] = delta["stop_reason"]
            if "container" in delta:
                self._message["container"] = delta["container"]
            if "context_management" in data:
                self._message["context_management"] = data["context_management"]
            self._usage.update(data.get("usage") or {})
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            self.fail(f"provider error in stream: {error_text(data)}")
        return ""

    def _delta(self, index: int, delta: dict[str, Any]) -> str:
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
            return str(delta.get("text", ""))
        if kind == "input_json_delta":
            self._json.setdefault(index, []).append(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            self._reasoned(str(delta.get("thinking", "")))
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature", "")
        elif kind == "citations_delta":
            block["citations"] = [*block.get("citations", ()), delta.get("citation")]
        elif kind == "compaction_delta":
            block["content"] = (block.get("content") or "") + (delta.get("content") or "")
        return ""

    def _build(self, error: str | None) -> AssistantMessage:
        blocks = []
        for index, block in sorted(self._blocks.items()):
            if block.get("type") in _CALL_BLOCKS:
                raw = "".join(self._json.get(index, [])) or "{}"
                try:
                    block = {**block, "input": json.loads(raw)}
                except ValueError:
                    block = {**block, "input": raw}  # kept raw: the tool reports it
            blocks.append(block)
        message = parse_anthropic_message(
            {**self._message, "content": blocks, "usage": self._usage}
        )
        if error is None:
            return message
        return finish_message(content=message.content, tool_calls=[], malformed=[], error=error)


# Hosted tools, Anthropic's server tools (``common.hosted_as_sent`` says how a spec's
# options are checked). A reply that used one keeps its blocks, all but our own
# ``tool_use``, verbatim on the message (``provider_items``): the thinking, the
# ``server_tool_use`` and its result, the text with its citations, in their order, sent
# back as they came on the next request.

_DOMAINS: dict[str, HostedRule] = {
    "max_uses": "at_most",
    "allowed_domains": "narrower",
    "blocked_domains": "wider",
    "user_location": "any",
}
_FETCH: dict[str, HostedRule] = {**_DOMAINS, "citations": "any", "max_content_tokens": "at_most"}
#: The server tools of this wire, and the options a spec may set on each.
HOSTED_TOOLS: HostedCatalogue = {
    **{f"web_search_{v}": _DOMAINS for v in ("20250305", "20260209", "20260318")},
    **{f"web_fetch_{v}": _FETCH for v in ("20250910", "20260209", "20260309", "20260318")},
    **{f"code_execution_{v}": {} for v in ("20250825", "20260120", "20260521")},
}
WIRE = "anthropic"
#: Blocks whose input streams as JSON pieces: our tool calls and the server's.
_CALL_BLOCKS = frozenset({"tool_use", "server_tool_use"})


def hosted_entries(options: ModelOptions | None) -> list[dict[str, Any]]:
    """The request's entries of the server tools: the type, the name the API gives it
    (the type without its version date), the options as the worker checked them."""
    if options is None:
        return []
    return [
        {"type": t.name, "name": t.name.rsplit("_", 1)[0], **t.options}
        for t in options.hosted_tools or ()
    ]


def _hosted_block(block: dict[str, Any]) -> bool:
    kind = str(block.get("type", ""))
    return kind == "server_tool_use" or (kind.endswith("_tool_result") and kind != "tool_result")


def _own_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    items = message.provider_items
    return list(items.items) if items is not None and items.wire == WIRE else []


def with_hosted_blocks(
    message: AssistantMessage, blocks: list[dict[str, Any]], usage: Any
) -> AssistantMessage:
    """``message`` with its reply's blocks kept, and its server tool calls counted in
    its usage (as ``usage.server_tool_use`` says, else by their blocks), when the reply
    used a server tool."""
    if message.is_error or not any(_hosted_block(b) for b in blocks):
        return message
    counted = (usage or {}).get("server_tool_use") if isinstance(usage, dict) else None
    calls: dict[str, int] = {}
    if isinstance(counted, dict):
        for key, n in counted.items():
            if key.endswith("_requests") and isinstance(n, int) and n > 0:
                calls[key.removesuffix("_requests")] = n
    else:
        for block in blocks:
            if block.get("type") == "server_tool_use":
                name = str(block.get("name", "server_tool"))
                calls[name] = calls.get(name, 0) + 1
    kept = [b for b in blocks if b.get("type") not in ("tool_use", "compaction")]
    total = (message.usage or Usage()).model_copy(update={"hosted_calls": calls or None})
    return message.model_copy(
        update={"provider_items": ProviderItems(wire=WIRE, items=kept), "usage": total}
    )


# A long turn of server tools may pause: the reply ends with ``stop_reason``
# ``pause_turn``, and the model goes on when the same request comes again with the
# paused blocks appended as the assistant's, as they came. The worker does so within
# the one model call (``continued_request``, ``joined_turn``), so the workflow sees one
# reply, whole.

PAUSED = "pause_turn"


def _turn_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    """The reply's blocks as its message keeps them: verbatim when it used a hosted
    tool, else rebuilt from its thinking and text (our own calls are its tool calls)."""
    if _own_blocks(message):
        return _own_blocks(message)
    return [b for b in _reply_blocks(message) if b.get("type") not in ("tool_use", "compaction")]


def _in_container(message: AssistantMessage, container: Any) -> AssistantMessage:
    """``message`` with the code-execution container its reply ran in noted on its
    items (the response's ``container``, an object with its ``id``)."""
    ident = container.get("id") if isinstance(container, dict) else None
    if not isinstance(ident, str) or message.provider_items is None:
        return message
    items = message.provider_items.model_copy(update={"container": ident})
    return message.model_copy(update={"provider_items": items})


def continued_request(body: dict[str, Any], so_far: AssistantMessage) -> dict[str, Any] | None:
    """The request that lets a paused turn go on: ``body`` again with the turn so far
    appended as the assistant's; ``None`` when ``so_far`` did not pause."""
    if so_far.finish_reason != PAUSED:
        return None
    blocks = _turn_blocks(so_far)
    turns = list(body.get("messages") or [])
    if turns and turns[-1].get("role") == "assistant":  # the request ended with the model's
        last = turns[-1]
        said = last.get("content") or []
        said = [{"type": "text", "text": said}] if isinstance(said, str) else list(said)
        turns[-1] = {**last, "content": [*said, *blocks]}
    else:
        turns.append({"role": "assistant", "content": blocks})
    container = _container_of(so_far)
    return {**body, "messages": turns, **({"container": container} if container else {})}


def _container_of(message: AssistantMessage) -> str | None:
    return message.provider_items.container if message.provider_items else None


def joined_turn(so_far: AssistantMessage, more: AssistantMessage) -> AssistantMessage:
    """One assistant message of a paused turn and its continuation: the text, the
    reasoning and every block in order, the usage (and hosted calls) summed."""
    usage = None
    if so_far.usage is not None or more.usage is not None:
        usage = (so_far.usage or Usage()) + (more.usage or Usage())
    reasoning = "\n\n".join(r for r in (so_far.reasoning, more.reasoning) if r) or None
    details = [*(so_far.reasoning_details or ()), *(more.reasoning_details or ())]
    malformed = [*(so_far.malformed_tool_calls or ()), *(more.malformed_tool_calls or ())]
    blocks = [*_turn_blocks(so_far), *_turn_blocks(more)]
    return more.model_copy(
        update={
            "content": so_far.content + more.content,
            "tool_calls": [*(so_far.tool_calls or ()), *(more.tool_calls or ())] or None,
            "reasoning": reasoning,
            "reasoning_details": details or None,
            "malformed_tool_calls": malformed or None,
            "provider_items": ProviderItems(
                wire=WIRE, items=blocks, container=_container_of(more) or _container_of(so_far)
            )
            if blocks
            else None,
            "compaction": so_far.compaction or more.compaction,
            "usage": usage,
        }
    )


# --- a reply, as a server of this wire would send it (for scripted models) ----------

_STOP_REASON_OF = {
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
    PAUSED: PAUSED,
}


def _reply_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks = compaction_blocks(message)
    blocks += [d for d in message.reasoning_details or () if d.get("type") in _THINKING_BLOCKS]
    text = message.refusal or message.content
    if _own_blocks(message):  # a reply that used hosted tools: its blocks as they were
        blocks = compaction_blocks(message) + _own_blocks(message)
    elif text:
        blocks.append({"type": "text", "text": text})
    for call in message.tool_calls or ():
        block = {"type": "tool_use", "id": call.id, "name": call.function.name}
        blocks.append({**block, "input": _tool_input(call.function.arguments)})
    return blocks


def anthropic_reply_body(message: AssistantMessage, model: str = "scripted") -> dict[str, Any]:
    """``message`` as a whole Messages API response."""
    finish = "content_filter" if message.refusal else reply_finish(message)
    usage = reply_usage(message)
    counted: dict[str, Any] = {}
    if usage.hosted_calls:
        calls = {f"{name}_requests": n for name, n in usage.hosted_calls.items()}
        counted["server_tool_use"] = calls
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _reply_blocks(message),
        "stop_reason": _STOP_REASON_OF.get(finish, "end_turn"),
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
            **counted,
        },
        **_applied_edits(usage),
        **({"container": {"id": c}} if (c := _container_of(message)) else {}),
    }


def _applied_edits(usage: Usage) -> dict[str, Any]:
    if not usage.cleared_input_tokens:
        return {}
    edit = {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": usage.cleared_tool_uses or 0,
        "cleared_input_tokens": usage.cleared_input_tokens,
    }
    return {"context_management": {"applied_edits": [edit]}}


def anthropic_reply_events(message: AssistantMessage, model: str = "scripted") -> list[Any]:
    """The events a server streams for ``message``: each block opened, its text and a
    tool call's input in pieces, then the stop reason and usage."""
    body = anthropic_reply_body(message, model)
    opening = {k: v for k, v in body.items() if k != "container"}  # it comes at the end
    opening = {**opening, "content": [], "stop_reason": None}
    events: list[Any] = [{"type": "message_start", "message": opening}]
    for index, block in enumerate(body["content"]):
        deltas: list[dict[str, Any]] = []
        if block["type"] == "text":
            deltas = [
                {"type": "citations_delta", "citation": c} for c in block.get("citations", ())
            ]
            deltas += [{"type": "text_delta", "text": p} for p in pieces(block["text"], 16)]
            block = {"type": "text", "text": ""}
        elif block["type"] in _CALL_BLOCKS:
            arguments = json.dumps(block["input"], separators=(",", ":"))
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces(arguments, 8)]
            block = {**block, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    stop = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    if "container" in body:
        stop["container"] = body["container"]
    events.append({"type": "message_delta", "delta": stop, "usage": body["usage"]})
    events.append({"type": "message_stop"})
    return events
