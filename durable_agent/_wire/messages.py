"""The message model: one ordered array of OpenAI-chat-shaped messages.

The JSON form of every message is its OpenAI Chat Completions wire form plus a
few extensions (all defaulting to ``None``), so
``m.model_dump(mode="json", exclude_none=True)`` of a message without
extensions is exactly what the provider receives. The array is the workflow
state; codecs derive every provider's request body from it.

Beside the messages, the small pure pieces every side of the boundary shares:
``Contract`` (the base of every model that crosses the workflow boundary),
``ToolDefinition`` (what a model is told of a tool), a session's title for listings, and
text made safe to show a person.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)


class _Frozen(BaseModel):
    # Frozen: a stored message is history; code derives new arrays instead of editing it.
    model_config = ConfigDict(extra="forbid", frozen=True)


MessageMode = Literal["user", "tool"]
"""Where a message came from: a person (``user``), or a tool or a system
action such as a rescue or a compaction (``tool``)."""


def _unset(value: object) -> bool:
    return value is None


class _Stored(_Frozen):
    """Extensions every message may carry; none of them is ever sent to a model."""

    id: str | None = Field(default=None, exclude_if=_unset)
    """A stable id of the message, kept as given; left out of
    payloads while unset, so arrays without ids cost nothing more."""
    given_id: str | None = Field(default=None, exclude_if=_unset)
    """The id a sender gave a message when it had the form the session gives its own
    (``m`` and digits): it is kept here, and ``id`` is the session's, so the two never
    name the same message twice (see ``sender_id``)."""
    source: str | None = Field(default=None, exclude_if=_unset)
    """Set on messages the loop made rather than a person or a model: ``compaction``
    marks a summary of earlier messages."""
    mode: MessageMode | None = None
    payload: Any = None
    """Arbitrary JSON metadata, kept with the message, never sent."""
    agent_name: str | None = None
    """In a swarm session: the agent that wrote the message (assistant, tool),
    was addressed (user) or whose prompt it is (system). Unset in one-agent sessions.
    An array written by an agent kit may call it ``agentName``."""

    @model_validator(mode="before")
    @classmethod
    def _kit_agent_name(cls, value: Any) -> Any:
        if isinstance(value, dict) and "agentName" in value:
            value = dict(value)
            name = value.pop("agentName")
            value.setdefault("agent_name", name)
        return value


# --- user content parts (already in OpenAI's content-part shape) -------------


class TextPart(_Frozen):
    type: Literal["text"] = "text"
    text: str


class ImageURL(_Frozen):
    url: str
    detail: Literal["auto", "low", "high"] | None = None


class ImagePart(_Frozen):
    """An image: by URL or ``data:`` URL (``image_url``, Chat Completions' own part), or
    by the file id a provider gave it when it was uploaded there (``file_id``: the
    Responses and Anthropic APIs take it; Chat Completions does not, and its request
    says the image was left out)."""

    type: Literal["image_url"] = "image_url"
    # left out of every dump when unset, so an image by URL has the shape it always had
    image_url: ImageURL | None = Field(default=None, exclude_if=_unset)
    file_id: str | None = Field(default=None, min_length=1, exclude_if=_unset)

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        if (self.image_url is None) == (self.file_id is None):
            raise ValueError("an image part has an image_url or a file_id, one of them")
        return self


class InputAudio(_Frozen):
    data: str
    """Base64-encoded audio."""
    format: str
    """OpenAI's audio format name (``wav``, ``mp3``, ...), see :func:`audio_format`."""


class AudioPart(_Frozen):
    type: Literal["input_audio"] = "input_audio"
    input_audio: InputAudio


class FileData(_Frozen):
    file_data: str | None = None
    """A ``data:<media type>;base64,...`` URL."""
    file_id: str | None = None
    file_url: str | None = None
    """A file by URL, which the provider fetches (Responses, Anthropic; Chat Completions
    has no such part: the worker sends it inline from an origin its owner registered,
    and otherwise the request says the file was left out)."""
    filename: str | None = None


class FilePart(_Frozen):
    type: Literal["file"] = "file"
    file: FileData


ContentPart = Annotated[TextPart | ImagePart | AudioPart | FilePart, Field(discriminator="type")]

# --- messages ------------------------------------------------------------------


class FunctionCall(_Frozen):
    name: str
    arguments: str
    """The raw JSON string exactly as the model emitted it; parsed only by the tool
    activity. An array that gives them as a JSON object (as agent kits write them) is
    read with the object as its compact JSON text."""

    @field_validator("arguments", mode="before")
    @classmethod
    def _object_as_text(cls, value: Any) -> Any:
        if isinstance(value, dict | list):
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return value


class ToolCall(_Frozen):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Usage(_Frozen):
    """Token counts, normalised to OpenAI's names whatever the provider called them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    """Of ``prompt_tokens``, those the provider served from its prompt cache."""
    cache_write_tokens: int | None = None
    """Of ``prompt_tokens``, those the provider wrote to its prompt cache (Anthropic
    bills them above the input price)."""
    hosted_calls: dict[str, int] | None = None
    """Calls of the provider's own tools in this turn, by tool (``web_search``: 2), which
    providers bill per call besides the tokens (``ModelPrice.per_hosted_call``)."""
    cleared_input_tokens: int | None = None
    """Input tokens the provider's context editing cleared before the model read the
    request (Anthropic's ``context_management.applied_edits``)."""
    cleared_tool_uses: int | None = None
    """Tool results that editing cleared."""

    def __add__(self, other: Usage) -> Usage:
        def opt(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        calls = dict(self.hosted_calls or {})
        for name, count in (other.hosted_calls or {}).items():
            calls[name] = calls.get(name, 0) + count

        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            reasoning_tokens=opt(self.reasoning_tokens, other.reasoning_tokens),
            cached_tokens=opt(self.cached_tokens, other.cached_tokens),
            cache_write_tokens=opt(self.cache_write_tokens, other.cache_write_tokens),
            hosted_calls=calls or None,
            cleared_input_tokens=opt(self.cleared_input_tokens, other.cleared_input_tokens),
            cleared_tool_uses=opt(self.cleared_tool_uses, other.cleared_tool_uses),
        )


class ProviderItems(_Frozen):
    """Items of a reply its wire API returned that have no place in the chat shape,
    kept exactly as they came. Requests to the endpoint that made them resend them in
    their place; any other endpoint, even one of the same wire, never receives them (a
    provider cannot read another's items, and they may name its own stores and
    containers)."""

    wire: str
    """The wire API that made them (``responses``, ``anthropic``)."""
    endpoint: str = ""
    """The account of the endpoint that made them (``ProviderEndpoint.account``: its base
    URL, with a digest of its key's variable and headers), set by the worker as the
    reply comes."""
    container: str | None = None
    """The code-execution container the reply ran its code in (Anthropic's
    ``container.id``): a paused turn's continuation names it, so the code goes on with
    the files and state it left there."""
    items: list[dict[str, Any]]
    """In the reply's order; what each holds is the provider's."""


class HostedCall(_Frozen):
    """A hosted tool's call as people are shown it: which tool, how it went, and what
    it looked for (a search's query, a fetched URL, the start of the code it ran)."""

    id: str
    name: str
    status: str
    """The provider's word: ``completed``, ``failed``, ``incomplete``, ``searching``..."""
    detail: str = ""


def hosted_calls(items: ProviderItems | None) -> list[HostedCall]:
    """The hosted tool calls among a reply's provider items, in order: a Responses
    ``*_call`` item, or an Anthropic ``server_tool_use`` block with its result's outcome."""
    found: list[HostedCall] = []
    blocks = items.items if items is not None else []
    results = {b.get("tool_use_id"): b for b in blocks if str(b.get("type")).endswith("_result")}
    for item in blocks:
        kind = str(item.get("type", ""))
        if kind.endswith("_call") and kind != "function_call":
            action: dict[str, Any] = item.get("action") or {}
            action = action if isinstance(action, dict) else {}
            said = action.get("query") or action.get("url") or item.get("queries")
            said = said or item.get("code")
            status = str(item.get("status") or "completed")
            name = kind.removesuffix("_call")
        elif kind == "server_tool_use":
            said = item.get("input")
            result = results.get(item.get("id"), {}).get("content")
            failed = isinstance(result, dict) and str(result.get("type", "")).endswith("_error")
            status = "completed" if item.get("id") in results else "incomplete"
            status = "failed" if failed else status
            name = str(item.get("name") or "server_tool")
        else:
            continue
        if isinstance(said, dict):
            said = said.get("query") or said.get("url") or said.get("code") or json.dumps(said)
        if isinstance(said, list):
            said = " | ".join(str(s) for s in said)
        detail = visible(str(said or ""))[:200]
        ident = str(item.get("id") or "")
        found.append(HostedCall(id=ident, name=name, status=status, detail=detail))
    return found


def cited_sources(items: ProviderItems | None) -> list[tuple[str, str]]:
    """The web pages a reply's provider items cite, each once, in order, as (URL,
    title): a Responses ``url_citation`` annotation, or an Anthropic text block's
    citation of a search result. Only ``http`` and ``https`` URLs: a page shows each
    as a link."""
    found: dict[str, str] = {}
    for item in items.items if items is not None else []:
        cites: list[Any] = list(item.get("citations") or [])
        for part in item.get("content") or [] if isinstance(item.get("content"), list) else []:
            if isinstance(part, dict):
                cites += part.get("annotations") or []
        for cite in cites:
            url = cite.get("url") if isinstance(cite, dict) else None
            if isinstance(url, str) and url.startswith(("https://", "http://")):
                found.setdefault(url, visible(str(cite.get("title") or ""))[:200])
    return list(found.items())


class SystemMessage(_Stored):
    role: Literal["system"] = "system"
    content: str | list[TextPart]
    name: str | None = None
    # extensions
    timestamp: int | None = None
    """Creation time in milliseconds since the epoch (local only)."""
    compacts: int | None = None
    """A compaction summary stands in, in requests, for the array's first ``compacts``
    messages (system messages excepted). They stay in the array."""


class UserMessage(_Stored):
    role: Literal["user"] = "user"
    content: str | list[ContentPart]
    name: str | None = None
    # extensions
    timestamp: int | None = None
    blocked: str | None = None
    """An input guardrail stopped this message (the reason): kept, never sent."""

    @model_validator(mode="before")
    @classmethod
    def _images_as_parts(cls, value: Any) -> Any:
        """``images`` (URLs or base64, or bytes as a list of numbers)
        become image parts after the text: one place for a message's content."""
        if not isinstance(value, dict) or not value.get("images"):
            return value
        value = dict(value)
        content, images = value.get("content") or [], value.pop("images")
        parts = (
            [{"type": "text", "text": content}] if isinstance(content, str) and content else content
        )
        value["content"] = [*parts, *(image_from_seed(i).model_dump() for i in images)]
        return value

    @property
    def images(self) -> list[ImagePart]:
        """Every image of the message, in the order its content holds them."""
        content = self.content
        return [p for p in content if isinstance(p, ImagePart)] if isinstance(content, list) else []


class _CarriesImages(_Stored):
    """Assistant and tool messages: they may carry images an agent kit's array puts on
    them."""

    images: list[ImagePart] | None = Field(default=None, exclude_if=_unset)
    """Images an agent kit's array puts on this message (``images``: URLs, base64 or
    bytes), kept with it; Chat Completions takes no image on this role, so none is sent."""

    @field_validator("images", mode="before")
    @classmethod
    def _seed_images(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [i if isinstance(i, dict | ImagePart) else image_from_seed(i) for i in value]
        return value


class CompactionPart(_Frozen):
    """The provider's own compaction, kept as it returned it: the Responses API's
    ``compaction`` item, Anthropic's ``compaction`` block. Later requests to the endpoint
    that made it carry it verbatim in place of the messages before it; no other endpoint
    is ever sent it (its content is the provider's, encrypted or signed for it)."""

    api: str
    """The wire that made it (``responses``, ``anthropic``)."""
    endpoint: str = ""
    """The account of the endpoint that made it (``ProviderEndpoint.account``: its base
    URL, with a digest of its key's variable and headers), set by the worker as the
    reply comes."""
    item: dict[str, Any]


class AssistantMessage(_CarriesImages):
    role: Literal["assistant"] = "assistant"
    content: str = ""
    """Always a string: a provider's ``null`` (pure tool-call turn) becomes ``""``."""
    tool_calls: list[ToolCall] | None = None
    refusal: str | None = None
    name: str | None = None
    # extensions
    reasoning: str | None = None
    """The flat, human-readable reasoning; resent only on tool-call turns."""
    model: str | None = Field(default=None, exclude_if=_unset)
    """The model that answered, when it was a fallback (``model.fallbacks``)."""
    voided_usage: Usage | None = Field(default=None, exclude_if=_unset)
    """Tokens billed for earlier attempts of this call whose worker was lost before it
    could report them (budgets count them; never sent)."""
    reasoning_details: list[dict[str, Any]] | None = None
    """Structured reasoning blocks, verbatim: never edited, reordered or dropped in storage."""
    provider_items: ProviderItems | None = Field(default=None, exclude_if=_unset)
    """Items of the reply that only its wire understands (a hosted tool's call and
    result, text with citations), kept verbatim and resent as they came, to that wire
    only."""
    finish_reason: str | None = None
    is_error: bool | None = None
    """The turn failed (blank or broken stream, refusal, provider error): see ``error``."""
    error: str | None = None
    timestamp: int | None = None
    usage: Usage | None = None
    malformed_tool_calls: list[str] | None = None
    """Tool-call blocks the provider sent that could not be read as calls, kept raw."""
    blocked: str | None = None
    """An output guardrail stopped this answer (the reason): kept, never sent."""
    compaction: CompactionPart | None = Field(default=None, exclude_if=_unset)
    """The provider compacted the conversation before this answer (its endpoint's
    ``compaction`` setting): sent back only to that endpoint, in place of what it replaced."""

    @field_validator("content", mode="before")
    @classmethod
    def _null_content_is_empty(cls, value: object) -> object:
        return "" if value is None else value

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _no_empty_tool_calls(cls, value: object) -> object:
        # OpenAI rejects "tool_calls": []; an empty batch is no batch.
        return None if value == [] else value


ApprovalDecision = Literal["approved", "denied"]
RecordedDecision = Literal["approved", "denied", "responded"]


class ApprovalRecord(_Frozen):
    """How a gated tool call was decided, kept on its result for audit."""

    decision: RecordedDecision
    """``responded``: a person supplied the result and the tool did not run."""
    by: str | None = None
    at: datetime | None = None
    reason: str | None = None
    timed_out: bool | None = None
    """The decision is the policy's default, applied when nobody answered in time."""
    original_arguments: str | None = None
    """Set when a person edited the arguments: the model's own (the call in the array
    keeps them too); ``arguments`` holds what ran."""
    arguments: str | None = None
    """The edited arguments the tool ran with."""
    scope: Literal["tool", "matching"] | None = None
    """The decision also granted later calls: every call of this tool, or those matching
    ``grant``'s tests (for this session)."""
    grant: str | None = None
    """The grant that made this decision (or that this decision made)."""
    rule: str | None = None
    """The spec's rule (``approvals.rules``) that decided the call."""
    verified: bool | None = None
    """``by`` was proved by a signed token (``None``: as the sender typed it)."""
    escalated: bool | None = None
    """The deadline was extended once and a second group asked (``approvals.escalation``)."""


class ToolMessage(_CarriesImages):
    role: Literal["tool"] = "tool"
    tool_call_id: str
    content: str
    # extensions
    tool_name: str | None = None
    is_error: bool | None = None
    approval: ApprovalRecord | None = None
    timestamp: int | None = None
    usage: Usage | None = None
    """Model tokens the tool spent (a sub-agent, a model it asked), counted by budgets."""


class FlushMessage(_Stored):
    """A history reset: requests after it start from the system messages and
    what follows it. Never sent itself."""

    role: Literal["flush"] = "flush"
    content: str = ""
    by: str | None = None
    reason: str | None = None
    timestamp: int | None = None


RescueStrategy = Literal["correct", "flush", "fail"]


class ResqueMessage(_Stored):
    """A step of model rescue (a ``resque`` message): the model's last turn could not be
    used (``reason``), and ``strategy`` says what the loop did. With ``correct`` the
    content reaches the model as a user message; otherwise it is a record only."""

    role: Literal["resque"] = "resque"
    content: str
    reason: str | None = None
    """Unset on ``resque`` messages imported with only their content, which carry only content."""
    strategy: RescueStrategy | None = None
    """Unset on imported ones: a record only, never sent."""
    attempt: int = 1
    timestamp: int | None = None


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage | FlushMessage | ResqueMessage,
    Field(discriminator="role"),
]
MessageAdapter: TypeAdapter[Message] = TypeAdapter(Message)
MessageListAdapter: TypeAdapter[list[Message]] = TypeAdapter(list[Message])

#: Fields that never cross the wire (the reasoning fields cross conditionally).
LOCAL_EXTENSIONS = frozenset(
    {
        "timestamp",
        "finish_reason",
        "is_error",
        "error",
        "usage",
        "malformed_tool_calls",
        "tool_name",
        "approval",
        "mode",
        "payload",
        "agent_name",
        "source",
        "id",
        "given_id",
        "model",
        "voided_usage",
        "compacts",
        "blocked",
        "images",
    }
)
REASONING_FIELDS = frozenset({"reasoning", "reasoning_details"})
#: Fields only the provider that made them is sent, in its own wire's shape: a
#: reply's hosted-tool items (``provider_items``) and the provider's compaction
#: (``compaction``). Never on Chat Completions.
PROVIDER_FIELDS = frozenset({"provider_items", "compaction"})


def parse_message(data: Any) -> Message:
    """Validate one message from its JSON form (a dict or a JSON string)."""
    if isinstance(data, str | bytes):
        return MessageAdapter.validate_json(data)
    return MessageAdapter.validate_python(data)


def parse_messages(data: Any) -> list[Message]:
    """Validate a message array from its JSON form (a list or a JSON string)."""
    if isinstance(data, str | bytes):
        return MessageListAdapter.validate_json(data)
    return MessageListAdapter.validate_python(data)


def dump_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The stored JSON form of an array: wire fields plus any extensions that are set."""
    return [m.model_dump(mode="json", exclude_none=True) for m in messages]


# --- constructors for the common cases ---------------------------------------

_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/mp3": "mp3",
    "audio/mpeg": "mp3",
    "audio/flac": "flac",
    "audio/ogg": "ogg",
}


def audio_format(media_type: str) -> str:
    """Map an audio media type to OpenAI's ``input_audio.format``."""
    media_type = media_type.strip().lower()
    if media_type in _AUDIO_FORMATS:
        return _AUDIO_FORMATS[media_type]
    if media_type.startswith("audio/") and len(media_type) > len("audio/"):
        return media_type.removeprefix("audio/")
    raise ValueError(f"not an audio media type: {media_type!r} (expected audio/*)")


def data_url(data: bytes, media_type: str) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


def text_part(text: str) -> TextPart:
    return TextPart(text=text)


def image_part(
    url: str | None = None,
    detail: Literal["auto", "low", "high"] | None = None,
    *,
    file_id: str | None = None,
) -> ImagePart:
    """An image by URL (``https://...`` or a ``data:`` URL), or by the ``file_id`` its
    provider gave it."""
    if file_id is not None:
        if url is not None:
            raise ValueError("an image is given by its url or by its file_id, not both")
        return ImagePart(file_id=file_id)
    if url is None:
        raise ValueError("an image needs its url, or file_id=")
    return ImagePart(image_url=ImageURL(url=url, detail=detail))


def image_part_from_bytes(
    data: bytes, media_type: str, detail: Literal["auto", "low", "high"] | None = None
) -> ImagePart:
    if not media_type.startswith("image/"):
        raise ValueError(f"not an image media type: {media_type!r} (expected image/*)")
    return image_part(data_url(data, media_type), detail)


def audio_part(data: bytes, media_type: str) -> AudioPart:
    fmt = audio_format(media_type)
    return AudioPart(
        input_audio=InputAudio(data=base64.b64encode(data).decode("ascii"), format=fmt)
    )


def file_part(data: bytes, filename: str, media_type: str = "application/pdf") -> FilePart:
    return FilePart(file=FileData(file_data=data_url(data, media_type), filename=filename))


def file_part_from_url(url: str, filename: str | None = None) -> FilePart:
    """A file by URL: the provider fetches it (on Chat Completions, which takes none by
    URL, the worker does, from the origins its owner registered)."""
    return FilePart(file=FileData(file_url=url, filename=filename))


def file_part_from_id(file_id: str) -> FilePart:
    """A file already uploaded to the provider."""
    return FilePart(file=FileData(file_id=file_id))


def user_message(*content: str | TextPart | ImagePart | AudioPart | FilePart) -> UserMessage:
    """A user message; a single text becomes plain string content, as on the wire."""
    if not content:
        raise ValueError("a user message needs some content")
    if len(content) == 1 and isinstance(content[0], str):
        return UserMessage(content=content[0])
    parts = [text_part(c) if isinstance(c, str) else c for c in content]
    return UserMessage(content=parts)


def text_of(content: str | Iterable[Any]) -> str:
    """The text of string or part-list content (non-text parts ignored)."""
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, TextPart))


#: First bytes of the image formats a seed array's bare base64 may hold.
_IMAGE_MAGIC = (
    (b"\x89PNG", "image/png"),
    (b"\xff\xd8", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"RIFF", "image/webp"),
)


def image_from_seed(image: str | list[int] | dict[str, Any]) -> ImagePart:
    """One of a message's ``images``: a URL (or ``data:`` URL) as it is; bare
    base64 or bytes as a ``data:`` URL of the type their first bytes say (PNG if
    none does); an image part as written (``{"file_id": ...}`` for a provider's file)."""
    if isinstance(image, dict):
        return ImagePart.model_validate(image)
    if isinstance(image, str) and image.startswith(("http://", "https://", "data:")):
        return image_part(image)
    data = bytes(image) if isinstance(image, list) else base64.b64decode(image, validate=True)
    kind = next((t for magic, t in _IMAGE_MAGIC if data.startswith(magic)), "image/png")
    return image_part(data_url(data, kind))


# The base of every model that crosses the workflow boundary: frozen, and strict about
# unknown fields (a payload with a field nobody reads is refused, not silently dropped).

class Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def nulls_kept(
    model: BaseModel, data: dict[str, Any], info: SerializationInfo, names: tuple[str, ...]
) -> dict[str, Any]:
    """``data`` (the model as serialized) with ``names`` put back as ``null`` where nulls
    were left out: for a field whose ``None`` means something other than its default
    (read back without it, the default would come instead). Payloads leave nulls out
    (``durable_agent._payloads.storage``), and this is what keeps that lossless."""
    if info.exclude_none:
        for name in names:
            if getattr(model, name) is None:
                data[name] = None
    return data


def explain(error: Exception) -> str:
    """What was wrong with a payload, each bad field by its path (for error texts)."""
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(input)'}: {e['msg']}" for e in error.errors()
        )
    return str(error) or type(error).__name__


# What a model is told about a tool: name, description, JSON schema.

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class ToolDefinition(BaseModel):
    """A tool as the codecs project it; execution policy lives elsewhere."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON Schema of the arguments, bound parameters included."""
    strict: bool = False
    bound_parameters: tuple[str, ...] = ()
    """Parameters injected at call time (session id, idempotency key, context): hidden
    from the model, stripped from the wire schema."""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        # The strictest provider rule (OpenAI and Anthropic): ^[a-zA-Z0-9_-]{1,64}$
        if not 1 <= len(name) <= 64 or not set(name) <= _NAME_CHARS:
            raise ValueError(
                f"tool name {name!r} must be 1-64 characters of letters, digits, '_' or '-'"
            )
        return name


# A session's title, for listings (Temporal memo ``title``): its first user words.
#
# Pure, and shared: the workflow titles a session by it, and ``AgentClient.start`` puts
# the same title in the start's memo, which saves the run an upsert of its memo (an
# event, and a write to the server's visibility store) when the two agree.

def session_title(messages: Sequence[Message], limit: int = 80) -> str:
    """The session's first user words, for listings (Temporal memo ``title``)."""
    for message in messages:
        if isinstance(message, UserMessage):
            content = message.content
            text = (
                content
                if isinstance(content, str)
                else " ".join(getattr(part, "text", "") for part in content)
            )
            text = " ".join(text.split())
            return text if len(text) <= limit else text[: limit - 3] + "..."
    return ""


def start_title(history: Sequence[Message], message: str | UserMessage | None) -> str:
    """The title of a session started with ``history`` and ``message``, as its run will
    work it out (the run upserts its own over a wrong one)."""
    if isinstance(message, str):
        message = UserMessage(content=message)
    return session_title([*history, message] if message is not None else history)


# Text a person reads, made safe to show: control and bidirectional-format characters
# written as ``\uXXXX`` escapes.
#
# A model, a tool or a session's starter chooses the text an approver reads and a
# terminal prints. A terminal escape can repaint the screen, and a right-to-left
# override can make ``amount=1000`` read as something else; shown as escapes, both are
# visible for what they are. Pure.

#: C0 and C1 controls, and the format characters that reorder or hide text (bidi
#: embeddings, overrides and isolates, zero-width characters, the Arabic letter mark,
#: the byte order mark, interlinear annotations, tag characters).
HIDDEN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def visible(text: str, keep: str = "") -> str:
    """``text`` with every hidden character but those in ``keep`` as an escape."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"

    return HIDDEN.sub(escape, text)
