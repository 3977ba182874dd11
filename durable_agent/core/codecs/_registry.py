"""Wire APIs by name: a ``Codec`` holds everything one provider API needs (its path, its
authentication headers, its name in telemetry, how a request is built, how a response or
a stream becomes an assistant message), and ``register_codec`` adds one.

A model endpoint names its API (``ProviderEndpoint.api``); the name is checked against
this registry when the endpoint is read, and the error lists the registered names. The
built-in APIs (``chat``, ``responses``, ``anthropic``) are registered by
``durable_agent.core.codecs``; a program adds its own before it reads specs that name them,
in the worker's process and in any client that builds such specs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._context import ContextRules
from .._messages import AssistantMessage, Message
from .._model_options import ModelOptions, ReasoningWire
from .._request_messages import prepare_request_messages
from .._tool_definition import ToolDefinition
from ._common import SHAPE_ERRORS, StreamAccumulator, finish_message

AuthHeaders = Callable[[str | None], dict[str, str]]
"""The headers that carry an endpoint's key (``None``: no key is sent)."""


def bearer_auth(key: str | None) -> dict[str, str]:
    """``Authorization: Bearer KEY``, as OpenAI and compatible servers take it."""
    return {"Authorization": f"Bearer {key}"} if key else {}


class Codec:
    """One provider API on the wire. Pure: no I/O and no clock, so it runs inside the
    workflow sandbox and in tests alike.

    ``build`` takes a prepared message array (``prepare_request_messages``) and the
    request's fields; ``parse`` turns a whole response body into an assistant message;
    ``accumulator`` makes a fresh stream accumulator; ``provider_name`` is the
    ``gen_ai.provider.name`` of its spans; ``sends_reasoning``: the builder takes the
    reasoning wire settings; ``operation``: what its spans say it does."""

    def __init__(
        self,
        api: str,
        path: str,
        build: Callable[..., dict[str, Any]],
        parse: Callable[[dict[str, Any]], AssistantMessage],
        accumulator: Callable[[], StreamAccumulator],
        *,
        provider_name: str,
        auth: AuthHeaders = bearer_auth,
        sends_reasoning: bool = False,
        operation: str = "chat",
    ) -> None:
        self.api = api
        self.operation = operation
        """Its ``gen_ai.operation.name`` (``chat``, ``embeddings``, ``generate_content``)."""
        self.path = path
        self.provider_name = provider_name
        self._build = build
        self._parse = parse
        self._accumulator = accumulator
        self._auth = auth
        self._sends_reasoning = sends_reasoning

    def auth_headers(self, key: str | None) -> dict[str, str]:
        """The headers a request to this API carries for ``key`` (and any it always
        needs, such as a version header)."""
        return self._auth(key)

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

    def parse_response(self, body: dict[str, Any]) -> AssistantMessage:
        """A whole response as one assistant message; one of an unexpected shape becomes
        an ``is_error`` message (a failed turn, retried), never an exception."""
        try:
            return self._parse(body)
        except SHAPE_ERRORS as error:
            reason = f"unexpected response shape ({error!r}): {str(body)[:200]}"
            return finish_message(content="", tool_calls=[], malformed=[], error=reason)

    def new_stream_accumulator(self) -> StreamAccumulator:
        return self._accumulator()


_CODECS: dict[str, Codec] = {}


def register_codec(name: str, codec: Codec) -> None:
    """Make ``name`` a wire API endpoints may name. Registering a different codec under
    a name already taken is an error (two parts of a program would disagree)."""
    if not name or name != name.strip():
        raise ValueError(f"a wire API needs a plain name, got {name!r}")
    known = _CODECS.get(name)
    if known is not None and known is not codec:
        raise ValueError(f"wire API {name!r} is registered already")
    _CODECS[name] = codec


def registered_apis() -> list[str]:
    """The names endpoints may use, sorted."""
    return sorted(_CODECS)


def codec_for(api: str) -> Codec:
    """The codec of ``api``; ``ValueError`` naming the registered ones for any other."""
    found = _CODECS.get(api)
    if found is None:
        known = ", ".join(registered_apis())
        raise ValueError(f"unknown wire API {api!r}: registered APIs are {known}")
    return found
