"""What a wire API is: the ``Codec`` protocol, and ``WireCodec``, which makes one of
functions.

A codec holds everything one provider API needs: its name (what an endpoint's ``api``
says), its path, its authentication headers, its name in telemetry, what its requests
carry (which kinds of part, files by URL or only inline, the prompt-cache fields, a JSON
object asked for, the key of its output-token cap), how a request is built and how a
response becomes an assistant message, and, optionally, how an assistant message is
sent back as its reply (what a scripted model in a test answers). The worker and the
test kit ask the codec each of these; nothing else tells wire APIs apart.
An API that streams also makes stream accumulators (``StreamingCodec``); one that never
streams need not. A worker's
``Registry`` holds the codecs it speaks: the built-in ones (``BUILT_IN_CODECS``) and any
its owner adds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol, runtime_checkable

from durable_agent._wire.codecs.common import (
    BUILT_EVERYWHERE,
    SHAPE_ERRORS,
    HostedCatalogue,
    StreamAccumulator,
    finish_message,
)
from durable_agent._wire.context import ContextRules
from durable_agent._wire.messages import AssistantMessage, Message, ToolDefinition
from durable_agent._wire.options import ModelOptions, ReasoningWire
from durable_agent._wire.outgoing import PartKind, prepare_request_messages

AuthHeaders = Callable[[str | None], dict[str, str]]
"""The headers that carry an endpoint's key (``None``: no key is sent)."""

JsonObjectAsk = Callable[[dict[str, Any], dict[str, Any]], None]
"""Puts the wire's request for a JSON object into a request body (the body, the
schema): for models whose endpoint says ``structured_output: json_object``."""


def bearer_auth(key: str | None) -> dict[str, str]:
    """``Authorization: Bearer KEY``, as OpenAI and compatible servers take it."""
    return {"Authorization": f"Bearer {key}"} if key else {}


@runtime_checkable
class Codec(Protocol):
    """One provider API on the wire. Pure: no I/O and no clock."""

    @property
    def api(self) -> str:
        """Its name, as an endpoint's ``api`` gives it."""

    @property
    def path(self) -> str:
        """What is appended to the endpoint's base URL."""

    @property
    def provider_name(self) -> str:
        """The ``gen_ai.provider.name`` of its spans."""

    @property
    def operation(self) -> str:
        """The ``gen_ai.operation.name`` of its spans (``chat``, ``embeddings``, ...)."""

    @property
    def output_type(self) -> str:
        """The ``gen_ai.output.type`` of its replies (``text``, ``image``)."""

    @property
    def takes(self) -> frozenset[PartKind]:
        """The kinds of part besides text its requests carry (``image``, ``audio``,
        ``file``); any other is left out of the request with a marker."""

    @property
    def takes_file_urls(self) -> bool:
        """Whether a file part may go by its URL; if not, the worker fetches each file
        its owner allows and sends it inline."""

    @property
    def caches_prompts(self) -> bool:
        """Whether its requests take the prompt-cache fields (``prompt_cache_key``)."""

    def ask_json_object(self, body: dict[str, Any], schema: dict[str, Any]) -> None:
        """Ask for a JSON object in ``body`` (``structured_output: json_object``; the
        schema is in the instructions too). A wire with no such field leaves the body."""

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The headers a request carries for ``key`` (``None``: no key is sent), and any
        it always needs, such as a version header."""

    def build_request(
        self,
        messages: Sequence[Message],
        *,
        model: str,
        tools: Sequence[ToolDefinition] = (),
        options: ModelOptions | None = None,
        output_schema: dict[str, Any] | None = None,
        reasoning: ReasoningWire | None = None,
        stream: bool = False,
        context: ContextRules | None = None,
    ) -> dict[str, Any]:
        """The request body for the message array."""

    def parse_response(self, body: dict[str, Any]) -> AssistantMessage:
        """A whole response as one assistant message (an ``is_error`` one for a body of
        an unexpected shape, never an exception)."""


@runtime_checkable
class StreamingCodec(Codec, Protocol):
    """A codec whose API streams: it makes an accumulator for each streamed reply."""

    def new_stream_accumulator(self) -> StreamAccumulator: ...


ReplyBody = Callable[[AssistantMessage], dict[str, Any]]
"""An assistant message as the whole response body a server of the wire sends."""

ReplyEvents = Callable[[AssistantMessage], list[Any]]
"""An assistant message as the SSE ``data`` items a server of the wire streams (each a
JSON object, or a string sent as it is, such as ``[DONE]``)."""


def output_cap_of(codec: Codec) -> str | None:
    """The request key ``codec`` writes its output-token cap in (``None``: it names none)."""
    found = getattr(codec, "output_cap", None)
    return found if isinstance(found, str) else None


def reply_body_of(codec: Codec, message: AssistantMessage) -> dict[str, Any] | None:
    """``message`` as ``codec``'s wire answers it whole (``None``: the codec cannot say)."""
    render = getattr(codec, "reply_body", None)
    return render(message) if callable(render) else None


def reply_events_of(codec: Codec, message: AssistantMessage) -> list[Any] | None:
    """``message`` as ``codec``'s wire streams it (``None``: the codec cannot say)."""
    render = getattr(codec, "reply_events", None)
    return render(message) if callable(render) else None


def built_by(codec: Codec) -> frozenset[str]:
    """The top-level keys ``codec``'s requests are built from, which a spec's
    ``model.options.extra`` never sets: its declared ``builds`` (a ``WireCodec``'s),
    always with the keys every wire builds."""
    declared = getattr(codec, "builds", ())
    return BUILT_EVERYWHERE | frozenset(declared)


def hosted_by(codec: Codec) -> HostedCatalogue:
    """The hosted tools ``codec``'s wire has, each with the options a spec may set on
    it (a codec that declares none has none)."""
    return getattr(codec, "hosted", None) or {}


class WireCodec:
    """A ``Codec`` made of functions: ``build`` takes a prepared message array
    (``prepare_request_messages``) and the request's fields; ``parse`` turns a whole
    response body into an assistant message; ``sends_reasoning``: the builder takes the
    reasoning wire settings. What its requests carry is declared: ``takes`` (kinds of
    part; none by default), ``takes_file_urls`` (else the worker sends files inline),
    ``caches_prompts``, ``json_object`` (how a JSON object is asked for; ``None``:
    in the instructions only), and ``builds``: every top-level key its requests may
    write, which a spec's ``model.options.extra`` may never set (the keys every wire
    builds, ``model``, ``messages``, ``tools``, ``stream``, the output limits, are
    always among them), ``output_cap``: the key its output-token cap goes in (what an
    endpoint's limit counts a request's output as). ``reply``: the inverse of ``parse``,
    an assistant message as the wire's whole response body, which the test kit's models
    answer with (without it they answer as Chat Completions does).
    ``StreamingWireCodec`` adds the stream accumulator, and ``reply_events``: the
    message as the wire streams it."""

    def __init__(
        self,
        api: str,
        path: str,
        build: Callable[..., dict[str, Any]],
        parse: Callable[[dict[str, Any]], AssistantMessage],
        *,
        provider_name: str,
        auth: AuthHeaders = bearer_auth,
        sends_reasoning: bool = False,
        operation: str = "chat",
        output_type: str = "text",
        takes: Collection[PartKind] = (),
        takes_file_urls: bool = False,
        caches_prompts: bool = False,
        json_object: JsonObjectAsk | None = None,
        builds: Collection[str] = (),
        output_cap: str | None = None,
        reply: ReplyBody | None = None,
        hosted: HostedCatalogue | None = None,
    ) -> None:
        self.api = api
        self.hosted: HostedCatalogue = hosted or {}
        """The provider's own tools a request may name (``common.HostedRule``)."""
        self.output_cap = output_cap
        self._reply = reply
        self.builds = BUILT_EVERYWHERE | frozenset(builds)
        self.operation = operation
        """Its ``gen_ai.operation.name`` (``chat``, ``embeddings``, ``generate_content``)."""
        self.output_type = output_type
        self.takes = frozenset(takes)
        self.takes_file_urls = takes_file_urls
        self.caches_prompts = caches_prompts
        self._json_object = json_object
        self.path = path
        self.provider_name = provider_name
        self._build = build
        self._parse = parse
        self._auth = auth
        self._sends_reasoning = sends_reasoning

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The headers a request to this API carries for ``key`` (and any it always
        needs, such as a version header)."""
        return self._auth(key)

    def ask_json_object(self, body: dict[str, Any], schema: dict[str, Any]) -> None:
        if self._json_object is not None:
            self._json_object(body, schema)

    def build_request(
        self,
        messages: Sequence[Message],
        *,
        model: str,
        tools: Sequence[ToolDefinition] = (),
        options: ModelOptions | None = None,
        output_schema: dict[str, Any] | None = None,
        reasoning: ReasoningWire | None = None,
        stream: bool = False,
        context: ContextRules | None = None,
    ) -> dict[str, Any]:
        """The request body. The array is shaped here, once (with the context budget);
        an array already shaped for the same budget is taken as it is."""
        extra = {"reasoning": reasoning} if self._sends_reasoning else {}
        return self._build(
            prepare_request_messages(messages, context),
            model=model,
            tools=tools,
            options=options,
            output_schema=output_schema,
            stream=stream,
            **extra,
        )

    def reply_body(self, message: AssistantMessage) -> dict[str, Any] | None:
        """``message`` as this wire's whole response body (``None``: no ``reply`` given)."""
        return self._reply(message) if self._reply is not None else None

    def reply_events(self, message: AssistantMessage) -> list[Any] | None:
        """``message`` as this wire streams it: a ``WireCodec`` does not stream."""
        return None

    def parse_response(self, body: dict[str, Any]) -> AssistantMessage:
        """A whole response as one assistant message; one of an unexpected shape becomes
        an ``is_error`` message (a failed turn, retried), never an exception."""
        try:
            return self._parse(body)
        except SHAPE_ERRORS as error:
            reason = f"unexpected response shape ({error!r}): {str(body)[:200]}"
            return finish_message(content="", tool_calls=[], malformed=[], error=reason)


class StreamingWireCodec(WireCodec):
    """A ``WireCodec`` whose API streams: ``accumulator`` makes one for each reply."""

    def __init__(
        self,
        api: str,
        path: str,
        build: Callable[..., dict[str, Any]],
        parse: Callable[[dict[str, Any]], AssistantMessage],
        accumulator: Callable[[], StreamAccumulator],
        *,
        reply_events: ReplyEvents | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(api, path, build, parse, **settings)
        self._accumulator = accumulator
        self._reply_events = reply_events

    def new_stream_accumulator(self) -> StreamAccumulator:
        return self._accumulator()

    def reply_events(self, message: AssistantMessage) -> list[Any] | None:
        """``message`` as this wire streams it (``None``: no ``reply_events`` given)."""
        return self._reply_events(message) if self._reply_events is not None else None
