"""Adapter from the Prompty conformance vectors' shapes to durable-agent's model.

The vectors describe messages as ``{"role", "content": [{"kind", "value", ...}]}``,
tools and outputs as Prompty property lists, and options in camelCase. This
module only translates those shapes; every behaviour under test is ours.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from durable_agent._spec.document import parse_structured_output, schema_from_properties
from durable_agent._wire.codecs import (
    build_anthropic_request,
    build_chat_request,
    build_embeddings_request,
    build_image_request,
    build_responses_request,
    new_stream_accumulator,
    parse_anthropic_message,
    parse_chat_completion,
    parse_embeddings_response,
    parse_image_response,
    parse_responses_response,
)
from durable_agent._wire.codecs.common import SSEEvent
from durable_agent._wire.messages import (
    AssistantMessage,
    AudioPart,
    FileData,
    FilePart,
    ImagePart,
    ImageURL,
    InputAudio,
    Message,
    SystemMessage,
    TextPart,
    ToolDefinition,
    ToolMessage,
    UserMessage,
    audio_format,
)
from durable_agent._wire.options import ModelOptions

#: The Prompty conformance vectors (MIT, ``vectors/LICENSE``), kept in the repository:
#: the suite reads nothing outside it.
VECTORS = Path(__file__).resolve().parent / "vectors" / "vectors.json"


def load_vectors(contract: str, operations: tuple[str, ...]) -> list[dict[str, Any]]:
    data = json.loads(VECTORS.read_text(encoding="utf-8"))
    return [
        e["vector"]
        for e in data["vectors"]
        if e["contract"] == contract and e["operation"] in operations
    ]


def _part(part: dict[str, Any]) -> Any:
    kind, value = part["kind"], part["value"]
    if kind == "text":
        return TextPart(text=value)
    if kind == "image":
        url = value
        if not value.startswith(("http://", "https://", "data:")) and part.get("mediaType"):
            url = f"data:{part['mediaType']};base64,{value}"
        return ImagePart(image_url=ImageURL(url=url, detail=part.get("detail")))
    if kind == "audio":
        return AudioPart(input_audio=InputAudio(data=value, format=audio_format(part["mediaType"])))
    if kind == "file":
        return FilePart(file=FileData(file_data=value))
    raise ValueError(f"unknown part kind {kind!r}")


def to_message(raw: dict[str, Any]) -> Message:
    role, content = raw["role"], raw.get("content")
    parts = [_part(p) for p in content] if isinstance(content, list) else content
    if role == "system":
        return SystemMessage(content=parts)
    if role == "user":
        return UserMessage(content=parts)
    if role == "assistant":
        return AssistantMessage.model_validate({**raw, "content": parts})
    return ToolMessage.model_validate(raw)


def to_tool(raw: dict[str, Any]) -> ToolDefinition:
    return ToolDefinition(
        name=raw["name"],
        description=raw.get("description", ""),
        parameters=schema_from_properties(raw.get("parameters", [])),
        strict=bool(raw.get("strict")),
        bound_parameters=tuple(raw.get("bindings") or {}),
    )


def to_options(raw: dict[str, Any] | None) -> ModelOptions:
    raw = raw or {}
    return ModelOptions(
        temperature=raw.get("temperature"),
        max_output_tokens=raw.get("maxOutputTokens"),
        top_p=raw.get("topP"),
        top_k=raw.get("topK"),
        frequency_penalty=raw.get("frequencyPenalty"),
        presence_penalty=raw.get("presencePenalty"),
        stop=raw.get("stopSequences"),
        seed=raw.get("seed"),
        extra=raw.get("additionalProperties") or {},
    )


def to_request(vector_input: dict[str, Any]) -> dict[str, Any]:
    messages = [to_message(m) for m in vector_input["messages"]]
    model = vector_input["model_id"]
    options = to_options(vector_input.get("options"))
    tools = [to_tool(t) for t in vector_input.get("tools") or []]
    outputs = vector_input.get("outputs") or []
    schema = schema_from_properties(outputs) if outputs else None
    api, provider = vector_input["apiType"], vector_input["provider"]
    if api == "embedding":
        return build_embeddings_request(messages, model=model, options=options)
    if api == "image":
        return build_image_request(messages, model=model, options=options)
    if api == "responses":
        return build_responses_request(
            messages, model=model, tools=tools, options=options, output_schema=schema
        )
    builder = build_anthropic_request if provider == "anthropic" else build_chat_request
    return builder(messages, model=model, tools=tools, options=options, output_schema=schema)


def _assistant_result(message: AssistantMessage, has_outputs: bool) -> Any:
    if message.tool_calls:
        return [
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in message.tool_calls
        ]
    text = message.content or message.refusal or ""
    if has_outputs:
        parsed = parse_structured_output(text)
        return parsed.value if parsed.ok else parsed.raw
    return text


def process(vector_input: dict[str, Any]) -> Any:
    """The vectors' ``result``: text, tool calls, a parsed object, vectors or an image."""
    api, body = vector_input["apiType"], vector_input["response"]
    if api == "embedding":
        vectors = parse_embeddings_response(body)
        return vectors[0] if len(vectors) == 1 else vectors
    if api == "image":
        image = parse_image_response(body)[0]
        return image.url or image.b64_json
    if api == "responses":
        message = parse_responses_response(body)
    elif vector_input["provider"] == "anthropic":
        message = parse_anthropic_message(body)
    else:
        message = parse_chat_completion(body)
    return _assistant_result(message, vector_input["has_outputs"])


def process_stream(vector_input: dict[str, Any]) -> dict[str, Any]:
    """Our stream outcome in the vectors' terms.

    A refusal is the model's determinate answer; any other failed stream is
    indeterminate (the request may have been processed) and is retried, so it
    "requires reconciliation". A completion is committed only when the turn did
    not fail.
    """
    accumulator = new_stream_accumulator("chat")
    chunks: list[dict[str, Any]] = []
    for event in vector_input["events"]:
        if event["kind"] == "provider":
            text = accumulator.add(SSEEvent(data=json.dumps(event["value"])))
            if text:
                chunks.append({"kind": "text", "value": text})
        elif event["kind"] == "transportError":
            accumulator.fail(event["message"])
    message = accumulator.finish()
    determinate = message.refusal is not None
    if message.is_error:
        chunks.append(
            {
                "kind": "failure",
                "failure": {
                    "outcome": "determinate" if determinate else "indeterminate",
                    "message": message.error,
                },
            }
        )
    return {
        "chunks": chunks,
        "partialText": message.content,
        "requiresReconciliation": bool(message.is_error) and not determinate,
        "completionCommitted": not message.is_error,
    }
