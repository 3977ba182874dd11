"""The codec endpoint the Temporal UI decodes through (its "remote codec endpoint").

The UI never holds the keys: it posts the payloads it shows to ``/codec/decode`` (and
``/codec/encode`` for what it sends) in Temporal's JSON form, with ``X-Namespace``,
and gets them back decoded. The gateway's guard stands in front, as for every other
entry point: the hosts it serves, the browser origins allowed to call it (the UI's,
``--codec-origin``), a body limit counted while reading, and the gateway's users (the
UI's "pass the user access token" setting, or a user of the gateway's token list).

An encrypted payload names the session it belongs to (``encryption.payload_session``),
and is decoded only for a caller who may see that session, by the same check as every
other entry point: its owner, or an admin. One the caller may not see comes back as it was
sent, still encrypted; one that names no session (encrypted before payloads were
bound to sessions) is decoded for admins only.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence

from google.protobuf.json_format import MessageToDict, ParseDict
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payload, Payloads

from durable_agent._client.results import SessionNotFoundError
from durable_agent._payloads.encryption import ENCRYPTED, EncryptionCodec, payload_session

from ._context import GatewayContext


def codec_routes(codec: EncryptionCodec, gateway: GatewayContext) -> list[Route]:
    """``POST /codec/encode`` and ``/codec/decode``, with their CORS preflights."""
    origins = gateway.access.codec_origins

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

    async def visible(request: Request, payloads: Sequence[Payload]) -> list[Payload]:
        """The payloads as the caller may have them decoded: those of sessions they may
        not see left as they are."""
        principal = gateway.principal_of(request)
        if gateway.sees_everything(principal):
            return await codec.decode(payloads)
        seen: dict[str, bool] = {}
        out = []
        for payload in payloads:
            session = payload_session(payload)
            if session is not None and session not in seen:
                try:
                    await gateway.session(request, session)
                    seen[session] = True
                except SessionNotFoundError:
                    seen[session] = False
            mine = session is not None and seen[session]
            plain = payload.metadata.get("encoding") != ENCRYPTED
            out.append((await codec.decode([payload]))[0] if mine or plain else payload)
        return out

    def endpoint(
        work: Callable[[Request, Sequence[Payload]], Awaitable[list[Payload]]],
    ) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            if request.method == "OPTIONS":
                if request.headers.get("origin") not in origins:
                    return JSONResponse({"error": "origin not allowed"}, 403)
                return cors(request, Response(status_code=204))
            try:
                payloads = ParseDict(json.loads(await request.body() or b"{}"), Payloads())
                done = await work(request, list(payloads.payloads))
            except Exception as error:  # a body or payload it cannot read: the caller's
                return cors(request, JSONResponse({"error": str(error)}, 400))
            answer = MessageToDict(Payloads(payloads=done))
            return cors(request, JSONResponse({"payloads": answer.get("payloads", [])}))

        return handle

    async def encode(request: Request, payloads: Sequence[Payload]) -> list[Payload]:
        return await codec.encode(payloads)

    return [
        Route("/codec/encode", endpoint(encode), methods=["POST", "OPTIONS"]),
        Route("/codec/decode", endpoint(visible), methods=["POST", "OPTIONS"]),
    ]
