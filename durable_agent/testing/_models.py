"""Models for development and tests, served as a Chat Completions endpoint on
127.0.0.1: the worker calls them through the same client and wire code as a real
provider, so nothing about the run is faked but the answers.

``FunctionModel`` answers with a function of yours; ``TestModel`` calls each of the
agent's tools once, with arguments made from their schemas, then answers with an object
of the output type (or a line of text). Register either on any worker::

    model = TestModel().start()
    capabilities = Capabilities(models={"openai": model.endpoint})

or answer every model call of a worker with it: ``Capabilities(every_model=...)``,
which ``durable-agent worker --model test`` does.

``RateLimitedModel`` answers as a provider with a rate limit does (a 429 past it), for
tests and benchmarks of shared limits.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from pydantic import ValidationError

from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._wire.codecs import wire_parameters
from durable_agent._wire.codecs.common import strict_schema
from durable_agent._wire.messages import AssistantMessage, Message, ToolDefinition, parse_messages

from ._scripted_provider import (
    RecordedRequest,
    Reply,
    Responder,
    ScriptedProvider,
    assistant_calls,
    assistant_text,
    error_reply,
)


@dataclass(frozen=True)
class ModelRequest:
    """What the model was asked: the conversation, the tools it may call (their
    ``function`` objects: name, description, parameters) and the answer's JSON Schema
    when the agent has an output type. ``body``: the request as sent."""

    messages: list[Message]
    tools: list[dict[str, Any]]
    output_schema: dict[str, Any] | None
    body: dict[str, Any]

    @classmethod
    def of(cls, request: RecordedRequest) -> ModelRequest:
        return cls.of_body(request.body if isinstance(request.body, dict) else {})

    @classmethod
    def of_body(cls, body: dict[str, Any]) -> ModelRequest:
        """The request a Chat Completions body asks (or any body whose ``messages`` are
        in its shape; another wire's body is read for nothing but itself: ``body``)."""
        tools = [t["function"] for t in body.get("tools") or [] if "function" in t]
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
        try:
            messages = parse_messages(body.get("messages") or [])
        except ValidationError:  # messages of another wire's shape
            messages = []
        return cls(messages, tools, schema, body)

    @classmethod
    def of_call(
        cls,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        output_schema: dict[str, Any] | None,
        body: dict[str, Any],
    ) -> ModelRequest:
        """The request a call asks, from its own parts whatever its wire (the run in
        process has them before they are encoded): the messages as sent, each tool's
        ``function`` object as Chat Completions would list it, and the schema as its
        structured-output field would carry it."""
        listed = []
        for tool in tools:
            function: dict[str, Any] = {"name": tool.name, "description": tool.description}
            if tool.strict:
                function["strict"] = True
            listed.append({**function, "parameters": wire_parameters(tool)})
        schema = strict_schema(output_schema) if output_schema is not None else None
        return cls(list(messages), listed, schema, body)

    def since_last_user(self) -> list[Message]:
        """The messages after the last user message (this turn's tool rounds)."""
        users = [i for i, m in enumerate(self.messages) if m.role == "user"]
        return self.messages[users[-1] + 1 :] if users else list(self.messages)


#: A model written as a function: the request in, the assistant's message out.
ModelFunction = Callable[[ModelRequest], AssistantMessage]


class FunctionModel:
    """A model that answers with ``function``, over HTTP on 127.0.0.1. Use as a context
    manager, or ``start()`` and ``stop()``; ``endpoint`` is where it listens;
    ``requests`` holds what it was sent."""

    def __init__(self, function: ModelFunction, *, port: int = 0) -> None:
        self._function = function
        self._server = ScriptedProvider(responder=self._answer, port=port)

    def _answer(self, request: RecordedRequest) -> AssistantMessage:
        return self._function(ModelRequest.of(request))

    @property
    def endpoint(self) -> ProviderEndpoint:
        return ProviderEndpoint(base_url=self._server.base_url, api_key_env=None)

    @property
    def requests(self) -> list[RecordedRequest]:
        return self._server.requests

    def start(self) -> Self:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()


def test_model_reply(request: ModelRequest) -> AssistantMessage:
    """``TestModel``'s answer: every tool once, in one batch, on a turn's first call;
    after that the answer, made from the output schema (or text naming what the tools
    returned)."""
    rounds = request.since_last_user()
    if request.tools and not any(m.role == "tool" for m in rounds):
        calls = [(t["name"], value_for(t.get("parameters") or {})) for t in request.tools]
        return assistant_calls(*calls)
    if request.output_schema is not None:
        return assistant_text(json.dumps(value_for(request.output_schema)))
    results = [str(m.content) for m in rounds if m.role == "tool"]
    return assistant_text("; ".join(results) if results else "success (no tool calls)")


class TestModel(FunctionModel):
    """A model that exercises an agent without a provider: it calls each tool once, with
    arguments its schema accepts, then answers with a value of the output type."""

    __test__ = False  # not a test class, whatever pytest makes of the name

    def __init__(self, *, port: int = 0) -> None:
        super().__init__(test_model_reply, port=port)


def value_for(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A small value ``schema`` accepts: the first of an enum, a default, the least of
    a range, every required property (and the others' defaults)."""
    defs = {**(defs or {}), **schema.get("$defs", {}), **schema.get("definitions", {})}
    if "$ref" in schema:
        return value_for(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key, []) if o.get("type") != "null"]
        if options:
            return value_for(options[0], defs)
        if key in schema:
            return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object" or "properties" in schema:
        properties: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", properties))
        return {k: value_for(v, defs) for k, v in properties.items() if k in required}
    if kind == "array":
        item = value_for(schema.get("items", {}), defs)
        return [item] * int(schema.get("minItems", 0))
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    if kind == "string":
        return _string(schema)
    return None


def _string(schema: dict[str, Any]) -> str:
    formats = {"date-time": "2026-01-01T00:00:00Z", "date": "2026-01-01", "email": "a@example.com"}
    found = formats.get(schema.get("format", ""), "a")
    return found * max(1, int(schema.get("minLength", 1))) if found == "a" else found


# A model with a provider's rate limit, for tests and benchmarks of shared limits:
# ``requests`` per ``window`` seconds of arrivals, and a 429 (Retry-After: 1) past them.
# Each accepted request is logged with when it arrived and its first user word (a
# tenant's name, when a test starts its sessions that way).

class RateLimitedModel:
    def __init__(self, requests: int, window: float, answer: Responder | None = None) -> None:
        self.requests, self.window = requests, window
        self._answer = answer or (lambda request: assistant_text("ok"))
        self.accepted: list[tuple[float, str]] = []
        """(arrival, first user word) of each request answered, in arrival order."""
        self.refused: list[float] = []
        """Arrivals answered 429."""
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Any:
        messages = request.body["messages"] if request.body else []
        now = time.monotonic()
        with self._lock:
            if sum(1 for t, _ in self.accepted if t > now - self.window) >= self.requests:
                self.refused.append(now)
                return error_reply(429, "rate limit reached", retry_after=1)
            first = next((m["content"] for m in messages if m["role"] == "user"), "?")
            self.accepted.append((now, str(first).split()[0] if first else "?"))
        reply: Reply | Any = self._answer(request)
        return reply
