"""The codec endpoint the Temporal UI decodes through (its "remote codec endpoint").

The UI never holds the keys: it posts the payloads it shows to ``/codec/decode`` (and
``/codec/encode`` for what it sends) in Temporal's JSON form, with ``X-Namespace``,
and gets them back decoded. Only the origins given may call it from a browser (CORS),
and with a token configured every call must carry it as a bearer token (the UI's
"pass the user access token" setting, or a proxy in front).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Sequence

from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import PayloadCodec

#: Largest request body the endpoint reads.
MAX_BODY_BYTES = 4 * 1024 * 1024


def codec_routes(codec: PayloadCodec, *, origins: Sequence[str], token: str | None) -> list[Route]:
    """``POST /codec/encode`` and ``/codec/decode``, with their CORS preflights."""

    def cors(request: Request, response: Response) -> Response:
        origin = request.headers.get("origin")
        if origin and origin in origins:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = (
                "Content-Type, X-Namespace, Authorization"
            )
            response.headers["Vary"] = "Origin"
        return response

    def refused(request: Request) -> Response | None:
        origin = request.headers.get("origin")
        if origin is not None and origin not in origins:
            return JSONResponse({"error": f"origin {origin} may not use this codec"}, 403)
        if token is not None:
            given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), token.encode()):
                return cors(request, JSONResponse({"error": "a bearer token is required"}, 401))
        return None

    def endpoint(
        work: Callable[[Sequence[Payload]], Awaitable[list[Payload]]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            if request.method == "OPTIONS":
                if request.headers.get("origin") not in origins:
                    return JSONResponse({"error": "origin not allowed"}, 403)
                return cors(request, Response(status_code=204))
            problem = refused(request)
            if problem is not None:
                return problem
            if request.headers.get("content-type", "").split(";")[0] != "application/json":
                return cors(request, JSONResponse({"error": "send application/json"}, 415))
            body = await request.body()
            if len(body) > MAX_BODY_BYTES:
                return cors(request, JSONResponse({"error": "body too large"}, 413))
            try:
                payloads = ParseDict(json.loads(body or b"{}"), Payloads())
                done = await work(list(payloads.payloads))
            except Exception as error:  # a body or payload it cannot read: the caller's
                return cors(request, JSONResponse({"error": str(error)}, 400))
            answer = MessageToDict(Payloads(payloads=done))
            return cors(request, JSONResponse({"payloads": answer.get("payloads", [])}))

        return handle

    return [
        Route("/codec/encode", endpoint(codec.encode), methods=["POST", "OPTIONS"]),
        Route("/codec/decode", endpoint(codec.decode), methods=["POST", "OPTIONS"]),
    ]
