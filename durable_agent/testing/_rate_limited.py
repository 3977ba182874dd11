"""A model with a provider's rate limit, for tests and benchmarks of shared limits:
``requests`` per ``window`` seconds of arrivals, and a 429 (Retry-After: 1) past them.
Each accepted request is logged with when it arrived and its first user word (a
tenant's name, when a test starts its sessions that way)."""

from __future__ import annotations

import threading
import time
from typing import Any

from ._scripted_provider import RecordedRequest, Reply, Responder, assistant_text, error_reply


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
