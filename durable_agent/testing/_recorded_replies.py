"""A recorded conversation as a model: the replies it holds, given again wherever the
request is the one that was made then.

``RecordedReplies`` is a responder for the scripted provider (real Chat Completions
over HTTP on 127.0.0.1). A request whose messages are the recorded array's up to an
assistant message is answered with that message, as recorded. Any other request is
where the new run departs: it is noted, and answered by the ``fallback`` (a live or
scripted model) or, without one, by an error that ends the turn.

A request made again (the workflow retries a model call whose worker was lost after
it asked) is the same request: it gets the answer it got before and is not counted
twice, so a rerun's figures do not depend on how loaded the machine was.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from durable_agent._wire._messages import AssistantMessage, Message
from durable_agent._wire.codecs import DEFAULT_API, build_request

from ._scripted_provider import error_reply

Fallback = Callable[[Any], Any]


def _wire(messages: Sequence[Message]) -> list[Any]:
    """The messages as the rerun's endpoint (of the default wire, Chat Completions)
    carries them, reduced to what they say."""
    body = build_request(DEFAULT_API, messages, model="recorded")
    return [_said(m) for m in body["messages"]]


def _said(message: dict[str, Any]) -> Any:
    calls = [
        (c["function"]["name"], json.loads(c["function"]["arguments"] or "{}"))
        for c in message.get("tool_calls") or []
    ]
    return [message.get("role"), message.get("content"), calls, message.get("tool_call_id")]


@dataclass
class Departure:
    """The first request that was not the recorded one: where it differs first."""

    request: int
    """Which model request of the new run (0: the first)."""
    message: int
    """The first message of the request that is not the recording's (its length when
    the request is the recording's own prefix but ends elsewhere)."""
    recorded: Any
    now: Any


@dataclass
class RecordedReplies:
    recorded: Sequence[Message]
    fallback: Fallback | None = None
    departed_status: int = 400
    """What a departure gets without a fallback: 400 ends the turn; 503 moves the call
    along the model's fallback chain (``rerun(live=True)``: to the live model)."""
    replayed: int = 0
    fresh: int = 0
    repeated: int = 0
    """Requests made again, answered as the first time and not counted above."""
    departures: list[Departure] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _answers: dict[str, Any] = field(default_factory=dict)
    _asking: dict[str, threading.Lock] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._wire = _wire(self.recorded)

    def __call__(self, request: Any) -> Any:
        sent = [_said(m) for m in (request.body or {}).get("messages", [])]
        key = json.dumps(sent, sort_keys=True)
        with self._lock:
            same = self._asking.setdefault(key, threading.Lock())
        with same:  # the same request twice at once: the second waits for the first
            if key in self._answers:
                with self._lock:
                    self.repeated += 1
                return self._answers[key]
            self._answers[key] = self._answer(request, sent)
            return self._answers[key]

    def _answer(self, request: Any, sent: list[Any]) -> Any:
        at = len(sent)
        with self._lock:
            number = self.replayed + self.fresh
            reply = self.recorded[at] if at < len(self.recorded) else None
            if isinstance(reply, AssistantMessage) and sent == self._wire[:at]:
                self.replayed += 1
                return reply
            self.fresh += 1
            first = next(
                (k for k, (a, b) in enumerate(zip(sent, self._wire, strict=False)) if a != b),
                min(at, len(self._wire)),
            )
            self.departures.append(
                Departure(
                    request=number,
                    message=first,
                    recorded=self._wire[first] if first < len(self._wire) else None,
                    now=sent[first] if first < len(sent) else None,
                )
            )
        if self.fallback is not None:
            return self.fallback(request)
        return error_reply(
            self.departed_status, f"the run departs from the recording at message {first}"
        )
