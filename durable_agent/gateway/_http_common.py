"""What every entry point of the gateway shares: HTTP errors that name the field, request
bodies read strictly, client and Temporal errors as 4xx/5xx JSON, and the rule that
maps a conversation id to its session."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._client._types import (
    DecisionRefusedError,
    MessageRefusedError,
    NoWorkerError,
    SessionClosedError,
    SessionExistsError,
    SessionNotFoundError,
    UnknownApprovalError,
)
from durable_agent._errors import DurableAgentError

from ._identity import Principal

CONVERSATION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
#: Most sessions or messages one page may ask for.
MAX_LIMIT = 1000


class HttpError(DurableAgentError):
    def __init__(self, status: int, error: str, field: str | None = None) -> None:
        super().__init__(error)
        self.status, self.error, self.field = status, error, field


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


#: Separates the parts of a conversation's session id: in no source, user name or
#: conversation id, so two principals' conversations never share one.
PART = "~"


def conversation_session(conversation_id: str, principal: Principal | None = None) -> str:
    """The session a principal's conversation id maps to:
    ``conversation-SOURCE~NAME~ID`` (``conversation-ID`` on a gateway without users)."""
    if not CONVERSATION_ID.match(conversation_id):
        raise HttpError(400, "a conversation id is 1-128 of A-Z a-z 0-9 _ . : -", "conversation_id")
    if principal is None:
        return f"conversation-{conversation_id}"
    return f"conversation-{principal.source}{PART}{principal.name}{PART}{conversation_id}"


def legacy_conversation_session(conversation_id: str, principal: Principal) -> str:
    """The id the conversation's session had before principals (``conversation-NAME-ID``,
    which two users could share: only its memo says whose it is)."""
    return f"conversation-{principal.name}-{conversation_id}"


async def read_body(request: Request, model: type[Body]) -> Any:
    return parse_json(await request.body() or b"{}", model)


ModelT = TypeVar("ModelT", bound=BaseModel)


def parse_json(raw: bytes, model: type[ModelT]) -> ModelT:
    """A request body as ``model``; a 400 naming the first field that is wrong."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        raise HttpError(400, f"{field or 'body'}: {first['msg']}", field) from None


def int_param(
    request: Request, name: str, default: int, minimum: int, maximum: int | None = None
) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise HttpError(400, f"{name}: not an integer: {text!r}", name) from None
    if value < minimum:
        raise HttpError(400, f"{name}: must be at least {minimum}", name)
    if maximum is not None and value > maximum:
        raise HttpError(400, f"{name}: must be at most {maximum}", name)
    return value


Handler = Callable[[Request], Awaitable[Response]]


def json_errors(handler: Handler) -> Handler:
    """Client errors as 4xx JSON; what the session refused says why."""

    async def handle(request: Request) -> Response:
        try:
            return await handler(request)
        except HttpError as error:
            body = {"error": error.error, **({"field": error.field} if error.field else {})}
            return JSONResponse(body, status_code=error.status)
        except SessionNotFoundError as error:
            return JSONResponse({"error": str(error)}, status_code=404)
        except UnknownApprovalError as error:
            return JSONResponse({"error": str(error), "field": "approval_id"}, status_code=404)
        except (
            SessionClosedError,
            SessionExistsError,
            MessageRefusedError,
            DecisionRefusedError,
        ) as error:
            return JSONResponse({"error": str(error)}, status_code=409)
        except NoWorkerError as error:
            return JSONResponse({"error": str(error)}, status_code=503)
        except RPCError as error:  # Temporal's answer, in the gateway's words and codes
            status = RPC_STATUS.get(error.status, 503)
            return JSONResponse({"error": f"Temporal: {error.message}"}, status_code=status)

    return handle


#: Temporal's refusals as HTTP statuses (anything else: the service is unavailable).
RPC_STATUS = {
    RPCStatusCode.INVALID_ARGUMENT: 400,
    RPCStatusCode.NOT_FOUND: 404,
    RPCStatusCode.ALREADY_EXISTS: 409,
    RPCStatusCode.FAILED_PRECONDITION: 409,
    RPCStatusCode.PERMISSION_DENIED: 403,
    RPCStatusCode.RESOURCE_EXHAUSTED: 429,
}
