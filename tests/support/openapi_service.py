"""A small HTTP service on 127.0.0.1 that serves its own OpenAPI document, for the tests."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support.local_http import LocalHttpServer

DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "orders", "version": "1"},
    "servers": [{"url": "/api"}],
    "components": {
        "schemas": {
            "NewOrder": {
                "type": "object",
                "properties": {"item": {"type": "string"}, "qty": {"type": "integer"}},
                "required": ["item", "qty"],
            }
        }
    },
    "paths": {
        "/orders/{order_id}": {
            "parameters": [
                {"name": "order_id", "in": "path", "required": True, "schema": {"type": "string"}}
            ],
            "get": {
                "operationId": "getOrder",
                "summary": "One order by id",
                "parameters": [{"name": "verbose", "in": "query", "schema": {"type": "boolean"}}],
            },
        },
        "/orders/{order_id}/label": {
            "get": {
                "operationId": "getLabel",
                "parameters": [
                    {
                        "name": "order_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
            },
        },
        "/orders": {
            "post": {
                "operationId": "createOrder",
                "summary": "Place an order",
                "parameters": [
                    {"name": "X-Request-Note", "in": "header", "schema": {"type": "string"}}
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/NewOrder"}}
                    },
                },
            },
            "put": {
                "operationId": "uploadOrders",
                "requestBody": {"content": {"multipart/form-data": {"schema": {"type": "object"}}}},
            },
        },
    },
}


class OrdersService(LocalHttpServer):
    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.seen: list[dict[str, Any]] = []
        super().__init__()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path == "/openapi.json":
                    return self._send(200, DOCUMENT)
                if url.path == "/garbage.json":
                    return self._send(200, "{this is: not [json")
                if url.path.endswith("/label"):
                    data = b"\x89PNG\r\n\x1a\n" + bytes(24)
                    self.send_response(200)
                    self.send_header("Content-Type", "image/png")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                if url.path.startswith("/api/orders/"):
                    order_id = unquote(url.path.removeprefix("/api/orders/"))
                    service.seen.append({"get": order_id, "query": parse_qs(url.query)})
                    if order_id == "missing":
                        return self._send(404, {"error": "no such order"})
                    return self._send(200, {"id": order_id, "item": "tea"})
                return self._send(404, {"error": "not here"})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                service.seen.append(
                    {
                        "post": body,
                        "note": self.headers.get("X-Request-Note"),
                        "key_ok": self.headers.get("X-Api-Key") == service.api_key,
                    }
                )
                if self.headers.get("X-Api-Key") != service.api_key:
                    return self._send(401, {"error": "bad key"})
                return self._send(201, {"id": "o-1", **body})

        return Handler
