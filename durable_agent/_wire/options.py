"""Provider-neutral request options and the per-provider reasoning egress policy."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from durable_agent._wire.messages import nulls_kept


class NamedToolChoice(BaseModel):
    """Make the model call this one tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)


ToolChoice = Literal["auto", "none", "required"] | NamedToolChoice


class HostedTool(BaseModel):
    """One of the provider's own tools (web search, file search, code execution), which
    the provider runs inside the model call: no worker runs it and no approval gates it.
    A session may ask for one only where the endpoint's owner allows that tool
    (``hosted_tools`` in ``Capabilities.endpoint_rules``), with options within the
    owner's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    """The tool's type on the endpoint's wire (``web_search`` on Responses,
    ``web_search_20250305`` on Anthropic)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The tool object's other fields, in the wire's own words (``filters``,
    ``max_uses``, ``allowed_domains``): only those the wire lets a spec set, and never
    past what the owner set."""


class ModelOptions(BaseModel):
    """Sampling and length options; each codec maps them to its API's names.

    An option an API does not support is left out silently. ``extra`` is added to the
    request body unmapped (``logprobs``, ``parallel_tool_calls``, ``reasoning_effort``,
    ...), but only keys the worker's owner allows for the endpoint (``request_options``
    in ``Capabilities.endpoint_rules``), and never one the request is built from
    (``model``, ``messages``, ``tools``, ``stream``, an output limit, a cache key, a
    mapped option): a session whose spec names another is refused when it starts.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_cache: bool | None = None
    """Ask the provider to cache each request's prefix, so the next request (the same
    with messages added) pays for it at the cached price: OpenAI's ``prompt_cache_key``
    (one per session and agent) on Chat Completions and Responses, Anthropic's
    ``cache_control`` breakpoints (the tools, the instructions, the conversation so
    far). Unset: on where the provider is known to take it (OpenAI's own endpoint and
    Anthropic's API); ``False`` sends none; ``True`` sends them to any endpoint."""
    prompt_cache_key: str | None = None
    """Set by the worker for each call when caching is on; a spec that sets it is
    refused at admission (the worker derives it with a secret of its own)."""
    temperature: float | None = Field(default=None, ge=0)
    max_output_tokens: int | None = Field(default=None, gt=0)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, gt=0)
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    tool_choice: ToolChoice | None = None
    """Whether the model may, must or must not call tools, or must call one named tool;
    each codec writes its API's shape, and only when the request has tools."""
    hosted_tools: list[HostedTool] | None = None
    """The provider's own tools this model may use, where the endpoint's owner allows
    them (``HostedTool``)."""
    extra: dict[str, Any] = Field(default_factory=dict)


class ReasoningWire(BaseModel):
    """How a Chat Completions provider wants reasoning resent on tool-call turns.

    Structured ``reasoning_details`` are resent verbatim when present (and
    accepted); otherwise the flat string goes under ``field``. Never both.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: Literal["reasoning_content", "reasoning"] | None = "reasoning_content"
    """Name of the flat reasoning field; ``None`` never resends reasoning."""

    send_details: bool = True
    """Resend ``reasoning_details`` verbatim when the turn has them."""
    send_empty: bool = False
    """Send the flat field as ``""`` on tool-call turns with no reasoning (DeepSeek
    thinking mode rejects a tool-call turn without it)."""

    @model_serializer(mode="wrap")
    def _never_kept(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        return nulls_kept(self, handler(self), info, ("field",))


#: Hosts whose APIs take the cache fields, so caching is on unless a spec turns it off.
CACHING_HOSTS = frozenset({"api.openai.com", "api.anthropic.com"})


def with_prompt_cache(
    options: ModelOptions,
    wire_caches: bool,
    base_url: str,
    session_id: str,
    agent: str | None,
    secret: bytes,
) -> ModelOptions:
    """``options`` with the call's cache key when caching is on for this endpoint (and
    its wire has the cache fields: ``wire_caches``), and none otherwise (whatever the
    spec carried): one key per session and agent, so a
    session's requests go to one cache. The key is a keyed digest (HMAC) with a
    ``secret`` only the workers hold: the session's id never reaches the provider, and
    whoever can start a workflow cannot compute another session's key to share its
    cache."""
    extra = {k: v for k, v in options.extra.items() if k != "prompt_cache_key"}
    options = options.model_copy(update={"prompt_cache_key": None, "extra": extra})
    wanted = options.prompt_cache
    if wanted is None:
        wanted = urlsplit(base_url).hostname in CACHING_HOSTS
    if not wanted or not wire_caches:
        return options
    named = f"{session_id}\0{agent or ''}".encode()
    key = hmac.new(secret, named, hashlib.sha256).hexdigest()[:32]
    return options.model_copy(update={"prompt_cache_key": key})


# Whose compaction runs for an endpoint: the owner's setting (``ProviderEndpoint.compaction``),
# here beside the other request settings so that the codecs read it.

CompactionStrategy = Literal["own", "provider", "both"]


class ClearToolUses(BaseModel):
    """Anthropic's context editing of old tool results (``clear_tool_uses_20250919``):
    past ``trigger_tokens`` of input the server replaces the oldest results with a
    placeholder, keeping the latest ``keep`` tool uses."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    trigger_tokens: int = Field(default=100_000, ge=1)
    keep: int = Field(default=3, ge=0)
    clear_at_least_tokens: int | None = Field(default=None, ge=1)
    """Clear at least this many tokens when it clears, so that the prompt cache the
    clearing breaks is broken for something worth it."""


class ProviderCompaction(BaseModel):
    """Whose compaction runs for the requests to one endpoint: the project's own (the
    spec's ``context`` rules: trimming, summaries), the provider's (its server compacts
    and returns an opaque item that later requests carry in place of what it replaced),
    or both. It is the owner's choice, set where the owner registers the endpoint; a spec
    can neither turn the provider's on nor change its settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: CompactionStrategy = "own"
    """``provider``: the request carries the provider's settings and the worker cuts it
    to no budget of its own; ``both``: the provider's settings, and the spec's budget
    too (the later of the two cuts wins)."""
    threshold_tokens: int = Field(default=150_000, ge=1_000)
    """Input tokens past which the provider compacts: the Responses API's
    ``compact_threshold``, Anthropic's ``compact_20260112`` trigger (which its API
    takes from 50,000 on; lower values are for test doubles and the cost bench)."""
    summarize: bool = True
    """Anthropic: ask for the server's summary (``compact_20260112``, beta
    ``compact-2026-01-12``). The Responses API always summarises."""
    clear_tool_uses: ClearToolUses | None = None
    """Anthropic: clear old tool results (beta ``context-management-2025-06-27``)."""
    keep_thinking_turns: int | None = Field(default=None, ge=1)
    """Anthropic: keep the thinking of only this many latest assistant turns
    (``clear_thinking_20251015``); unset sends no such edit."""

    @property
    def provider_runs(self) -> bool:
        return self.strategy != "own"

    @property
    def own_runs(self) -> bool:
        return self.strategy != "provider"
