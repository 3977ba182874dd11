"""An HTTP server on 127.0.0.1 that records every request it gets: the host a hostile
spec points at, so a test can show that nothing reached it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.local_http import LocalHttpServer


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""


class RecordingServer(LocalHttpServer):
    """Answers ``routes[path]`` (status, headers, JSON body), else 200 ``{}``."""

    def __init__(self, routes: dict[str, tuple[int, dict[str, str], Any]] | None = None) -> None:
        self.routes = routes or {}
        self.seen: list[Seen] = []
        super().__init__()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = dict(self.headers.items())
                server.seen.append(Seen(self.command, self.path, headers, body))
                status, answer_headers, answer = server.routes.get(self.path, (200, {}, {}))
                data = json.dumps(answer).encode()
                self.send_response(status)
                for name, value in answer_headers.items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        return Handler
