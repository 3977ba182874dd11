"""A file origin on 127.0.0.1: serves files with an ``ETag`` (answering 304 to a request
that names it), can start refusing everyone (403), can trickle a file a byte at a time
or send one without its length, and records every request (its path, query and
conditional header) and the body bytes it served, so a test can show what reached it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.local_http import LocalHttpServer


@dataclass(frozen=True)
class Asked:
    path: str
    if_none_match: str | None


@dataclass
class FileOrigin(LocalHttpServer):
    files: dict[str, bytes] = field(default_factory=dict)
    """Path (without the query) -> content."""
    forbidden: bool = False
    """Answer 403 to everything from now on."""
    trickle: set[str] = field(default_factory=set)
    """Paths sent a byte every 0.2 s."""
    unsized: set[str] = field(default_factory=set)
    """Paths sent without a ``Content-Length``, in 64 KB pieces: the body ends when the
    connection does."""
    asked: list[Asked] = field(default_factory=list)
    served: int = 0
    """Body bytes the connections took, all requests together."""

    def __post_init__(self) -> None:
        super().__init__()

    def paths(self) -> list[str]:
        return [a.path.split("?", 1)[0] for a in self.asked]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        origin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                tag = self.headers.get("if-none-match")
                origin.asked.append(Asked(self.path, tag))
                path = self.path.split("?", 1)[0]
                body = origin.files.get(path)
                if origin.forbidden or body is None:
                    self.send_error(403 if origin.forbidden else 404)
                    return
                etag = f'"{hash(body) & 0xFFFFFF:x}"'
                if tag == etag:
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/pdf")
                if path not in origin.unsized:
                    self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", etag)
                self.end_headers()
                if path in origin.unsized:
                    try:
                        for at in range(0, len(body), 64 * 1024):
                            self.wfile.write(body[at : at + 64 * 1024])
                            origin.served += len(body[at : at + 64 * 1024])
                    except OSError:  # the fetcher stopped reading and hung up
                        return
                    return
                if path not in origin.trickle:
                    self.wfile.write(body)
                    origin.served += len(body)
                    return
                try:
                    for byte in body:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:  # the fetcher gave up and hung up
                    return

        return Handler
