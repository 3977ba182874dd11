"""A scripted model server over real HTTP on 127.0.0.1.

Tests (ours and our users') script the model's turns, point an agent's
``base_url`` at it, and read back the exact request bodies it received. Each
scripted turn is an :class:`AssistantMessage`, rendered in the shape of the wire the
request came on (found by its path: Chat Completions, Responses, Messages, or an
owner's codec given in ``codecs``), as a whole body or as an SSE stream depending on
what the request asked for; or a raw :class:`Reply` for faults (error statuses,
resets, cut streams, delays).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from durable_agent._wire.codecs import (
    BUILT_IN_CODECS,
    Codec,
    reply_body_of,
    reply_events_of,
)
from durable_agent._wire.codecs.chat import chat_reply_body, chat_reply_events
from durable_agent._wire.messages import AssistantMessage, ToolCall

# --- what the server received -------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    """The parsed JSON body (``None`` when the body was not JSON)."""
    received_at: float = field(default_factory=time.monotonic)
    """When it arrived (``time.monotonic``), for measuring how soon a retry came."""

    @property
    def streamed(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


# --- replies ------------------------------------------------------------------


#: The longest a held stream waits for its barrier (then it goes on, and a test that
#: expected the barrier to be set fails by its own assertion).
HOLD_SECONDS = 60.0


@dataclass(frozen=True)
class Reply:
    """A raw HTTP reply. ``chunks`` are written one by one (``delay`` seconds apart)
    as an SSE stream when ``sse`` is set, else joined as one body."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    sse: bool = False
    chunks: tuple[bytes, ...] = ()
    delay: float = 0.0
    """Seconds to wait before answering (or between stream chunks)."""
    cut: bool = False
    """End the stream by dropping the connection, without its final chunk."""
    reset: bool = False
    """Answer nothing: reset the connection (TCP RST)."""
    hold: threading.Event | None = field(default=None, compare=False)
    """A barrier: after ``hold_after`` chunks, wait until it is set (at most
    ``HOLD_SECONDS``) before sending the rest, so a test proves streaming by order."""
    hold_after: int = 0


def json_reply(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    return Reply(status=status, body=json.dumps(body).encode(), headers=headers or {})


def error_reply(
    status: int, message: str, *, retry_after: float | None = None, kind: str = "error"
) -> Reply:
    """An error in the shape OpenAI uses: ``{"error": {"message", "type"}}``."""
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    return json_reply({"error": {"message": message, "type": kind}}, status, headers)


def sse_reply(
    events: Iterable[Any], *, delay: float = 0.0, done: bool = True, cut: bool = False
) -> Reply:
    """An SSE stream of ``data:`` events (dicts are JSON-encoded, bytes sent as they are)."""
    chunks = [
        e
        if isinstance(e, bytes)
        else f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode()
        for e in events
    ]
    if done and not cut:
        chunks.append(b"data: [DONE]\n\n")
    return Reply(sse=True, chunks=tuple(chunks), delay=delay, cut=cut)


# --- rendering an assistant turn ----------------------------------------------

chat_completion_body = chat_reply_body
"""``message`` as a whole Chat Completions response."""


def chat_stream_events(message: AssistantMessage, model: str = "scripted") -> list[Any]:
    """The chunks a Chat Completions server streams for ``message`` (without ``[DONE]``)."""
    return [e for e in chat_reply_events(message, model) if e != "[DONE]"]


def codec_for(path: str, codecs: Iterable[Codec]) -> Codec | None:
    """The codec whose path the request's path ends with (the longest such: ``/chat``
    and ``/chat/completions`` are two wires), or ``None``."""
    found = [c for c in codecs if path.split("?")[0].endswith(c.path)]
    return max(found, key=lambda c: len(c.path)) if found else None


def render_turn(
    message: AssistantMessage, request: RecordedRequest, codecs: Iterable[Codec] = ()
) -> Reply:
    """``message`` as the wire the request was sent on answers it (its codec's
    ``reply_body``, or its ``reply_events`` when the request asked for a stream); as
    Chat Completions when no codec says how."""
    codec = codec_for(request.path, [*BUILT_IN_CODECS.values(), *codecs])
    if codec is not None:
        events = reply_events_of(codec, message) if request.streamed else None
        if events is not None:
            return sse_reply(events, done=False)
        body = reply_body_of(codec, message)
        if body is not None:
            return json_reply(body)
    if request.streamed:
        return sse_reply(chat_stream_events(message))
    return json_reply(chat_completion_body(message))


Responder = Callable[[RecordedRequest], "AssistantMessage | Reply"]


# --- the server ------------------------------------------------------------------


class ScriptedProvider:
    """Serve scripted turns over HTTP on 127.0.0.1.

    Turns are taken in order, one per request; when the script runs out the
    ``responder`` (if any) answers, else the request gets a 500 that says so.
    Use as a context manager, or call :meth:`start` and :meth:`stop`. Every request is
    kept in ``requests`` unless ``keep_requests`` is off (a long run whose requests
    carry thousands of messages, where holding them all would weigh on the process).
    """

    def __init__(
        self,
        script: Sequence[AssistantMessage | Reply] = (),
        *,
        responder: Responder | None = None,
        port: int = 0,
        keep_requests: bool = True,
        codecs: Iterable[Codec] = (),
    ) -> None:
        self._script: list[AssistantMessage | Reply] = list(script)
        self.codecs: list[Codec] = list(codecs)
        """Wires besides the built-in ones its turns are rendered for (an owner's codecs,
        each found by its path)."""
        self._keep = keep_requests
        self._responder = responder
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self.sent: list[tuple[float, bytes]] = []
        """Each stream chunk written, with when (``time.monotonic``): for latency figures."""
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def add(self, *turns: AssistantMessage | Reply) -> None:
        with self._lock:
            self._script.extend(turns)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def bodies(self) -> list[Any]:
        with self._lock:
            return [r.body for r in self.requests]

    def start(self) -> ScriptedProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> ScriptedProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            if self._keep:
                self.requests.append(request)
            turn = self._script.pop(0) if self._script else None
        if turn is None:
            if self._responder is None:
                return error_reply(500, "scripted provider: the script has no turn left")
            turn = self._responder(request)
        if isinstance(turn, AssistantMessage):
            return render_turn(turn, request, self.codecs)
        return turn


def _handler_for(provider: ScriptedProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            request = RecordedRequest(
                method="POST", path=self.path, headers=dict(self.headers.items()), body=body
            )
            self._send(provider._next(request))

        def _send(self, reply: Reply) -> None:
            if reply.reset:
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.close_connection = True
                self.connection.close()
                return
            if reply.delay and not reply.sse:
                time.sleep(reply.delay)
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if not reply.sse:
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
                return
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for k, piece in enumerate(reply.chunks):
                    if reply.hold is not None and k == reply.hold_after:
                        reply.hold.wait(HOLD_SECONDS)
                    if reply.delay:
                        time.sleep(reply.delay)
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
                    provider.sent.append((time.monotonic(), piece))
                if reply.cut:
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.close_connection = True

    return Handler


def assistant_text(text: str, **extra: Any) -> AssistantMessage:
    """A final-answer turn."""
    return AssistantMessage(content=text, **extra)


def assistant_calls(
    *calls: tuple[str, dict[str, Any]] | ToolCall, ids: str | None = None, **extra: Any
) -> AssistantMessage:
    """A tool-call turn from (name, arguments) pairs; ``ids="call_0"`` reuses one id."""
    tool_calls = []
    for k, call in enumerate(calls):
        if isinstance(call, ToolCall):
            tool_calls.append(call)
            continue
        name, arguments = call
        tool_calls.append(
            ToolCall.model_validate(
                {
                    "id": ids if ids is not None else f"call_{k}",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            )
        )
    return AssistantMessage(content="", tool_calls=tool_calls, **extra)
