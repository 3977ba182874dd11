"""An OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1 for the memory tests:
each text becomes a vector of the concepts its words name (dogs, cats, cars), so texts
that share a meaning but no word come out near each other. It records every request."""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.local_http import LocalHttpServer

CONCEPTS = (
    {"dog", "dogs", "puppy", "canine", "hound"},
    {"cat", "cats", "kitten", "feline"},
    {"car", "cars", "vehicle", "automobile", "drive"},
)


def vector(text: str) -> list[float]:
    words = set(re.findall(r"\w+", text.lower()))
    return [float(len(words & concept)) + 0.01 for concept in CONCEPTS]


class EmbeddingsServer(LocalHttpServer):
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        super().__init__()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                server.requests.append((self.path, dict(self.headers.items()), body))
                data = [
                    {"object": "embedding", "index": k, "embedding": vector(text)}
                    for k, text in enumerate(body["input"])
                ]
                answer = json.dumps({"object": "list", "data": data, "model": body["model"]})
                self.send_response(200 if self.path == "/v1/embeddings" else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer.encode())

        return Handler
