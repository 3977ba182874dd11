"""A session's wake-ups over REST, beside its other routes and behind the same owner
check: list them, set one, cancel one. The door only translates: the session keeps
every rule, and one it refuses (past the worker owner's bounds, or an agent without
wake-ups) is a 409 with its sentence, with nothing scheduled."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from durable_agent._errors import WakeUpRefused

from ._context import Body, GatewayContext, Handler, HttpError, json_errors, read_body


class WakeUpBody(Body):
    """A wake-up: its ``text`` and exactly one of ``at`` (an ISO 8601 time with its
    offset), ``after_seconds``, ``every_seconds`` or ``cron`` (read in ``timezone``)."""

    text: str = Field(min_length=1, max_length=100_000)
    at: datetime | None = None
    after_seconds: float | None = Field(default=None, ge=0)
    every_seconds: int | None = Field(default=None, ge=1)
    cron: str | None = Field(default=None, max_length=200)
    timezone: str = Field(default="UTC", max_length=64)


def _refused(handler: Handler) -> Handler:
    async def handle(request: Request) -> Response:
        try:
            return await handler(request)
        except WakeUpRefused as error:
            return JSONResponse({"error": str(error)}, status_code=409)

    return json_errors(handle)


def wake_up_routes(gateway: GatewayContext) -> list[Route]:
    agents = gateway.agents

    async def owned(request: Request) -> str:
        return await gateway.session(request, request.path_params["session_id"])

    async def listed(request: Request) -> Response:
        found = await agents.session(await owned(request)).wake_ups()
        return JSONResponse([w.model_dump(mode="json") for w in found])

    async def set_one(request: Request) -> Response:
        body: WakeUpBody = await read_body(request, WakeUpBody)
        if body.at is not None and body.at.tzinfo is None:
            raise HttpError(400, "at: give the time with its offset, as 2026-12-08T09:00+01:00")
        session = agents.session(await owned(request))
        made = await session.wake_up(
            body.text,
            at=body.at,
            after=body.after_seconds,
            every=body.every_seconds,
            cron=body.cron,
            timezone=body.timezone,
        )
        return JSONResponse(made.model_dump(mode="json"), status_code=201)

    async def cancel(request: Request) -> Response:
        session = agents.session(await owned(request))
        await session.cancel_wake_up(request.path_params["wake_up_id"])
        return JSONResponse({"cancelled": request.path_params["wake_up_id"]})

    path = "/api/sessions/{session_id}/wake-ups"
    return [
        Route(path, _refused(listed), methods=["GET"]),
        Route(path, _refused(set_one), methods=["POST"]),
        Route(path + "/{wake_up_id}/cancel", _refused(cancel), methods=["POST"]),
    ]
