"""What the OpenAI-compatible endpoints share: which agent a ``model`` names, OpenAI's
error shape, and how a reply is waited for.

``model`` names one of the gateway's agents (``--agents``), or the gateway's own spec
by any other name when it has one. The request never brings tools or instructions:
the agent's spec decides them, and the workers run its tools.

Also a reply's text given as one delta when it was not streamed (``whole_replies``), for
the entry points that speak in deltas.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.approvals import PendingApproval
from durable_agent._contracts.events import (
    AttemptRestarted,
    Ended,
    Idle,
    LiveEvent,
    MessageAppended,
    ModelStarted,
    ReasoningDelta,
    TextDelta,
)
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import (
    AssistantMessage,
    HostedCall,
    Message,
    Usage,
    hosted_calls,
)

from ._context import GatewayContext, HttpError, json_errors

# A reply's text as one delta when it was not streamed, for the entry points that speak in
# deltas (OpenAI chat and Responses streams, AG-UI).
#
# The log streams a model's text as ``text_delta`` events, but not always: a session may
# turn deltas off (``live_deltas``), and a reply hook keeps them back (readers would see
# the text before the rewrite). The reply's text is then only in its own
# ``message_appended`` event. An entry point reading the log through ``whole_replies`` gets
# that text (and reasoning) as one delta just before the message, so its client shows
# the answer either way. The session's own event stream is left as the log has it.
#
# A request that joins a reply under way reads its events through ``from_call_start``,
# which leaves out the text of the model call it joined in the middle of.

async def whole_replies(events: AsyncIterator[LiveEvent]) -> AsyncIterator[LiveEvent]:
    """``events``, with a delta made up for each part of a reply that was not streamed
    (at the offset before the reply's, so a reader resuming after it sees it again).
    Only the reply to a model call seen starting: the messages a run announces from an
    earlier one (a resumed or continued session) are not answers being given now."""
    turn, calling, text, reasoning = 0, False, False, False
    async for event in events:
        if isinstance(event, ModelStarted | AttemptRestarted):
            turn, calling, text, reasoning = event.turn, True, False, False
        elif isinstance(event, TextDelta):
            text = True
        elif isinstance(event, ReasoningDelta):
            reasoning = True
        elif isinstance(event, MessageAppended) and isinstance(event.message, AssistantMessage):
            reply, at = event.message, max(event.offset - 1, 0)
            if calling and reply.reasoning and not reasoning:
                yield ReasoningDelta(offset=at, turn=turn, text=reply.reasoning)
            if calling and reply.content and not text:
                yield TextDelta(offset=at, turn=turn, text=reply.content)
            calling = False
        yield event


async def from_call_start(events: AsyncIterator[LiveEvent]) -> AsyncIterator[LiveEvent]:
    """``events`` without the text and reasoning of a model call whose start they do not
    hold. A request that joins a session mid-answer (sent again after a decision or a
    disconnect) reads the log from where it is now: the call under way has streamed its
    beginning already, and its rest alone would show a client a reply that starts
    mid-sentence. The entry point gives the whole reply instead (the OpenAI endpoints
    as one piece of text, AG-UI in its closing snapshot)."""
    joined = False
    async for event in events:
        if isinstance(event, ModelStarted | AttemptRestarted):
            joined = True
        elif isinstance(event, TextDelta | ReasoningDelta) and not joined:
            continue
        yield event


#: The model name that runs the gateway's own spec (``--spec``), listed by /v1/models.
DEFAULT_MODEL = "durable-agent"


def openai_errors(handler: Callable[[Request], Awaitable[Response]]) -> Any:
    """The gateway's errors in OpenAI's shape (the SDKs raise them with the message)."""
    inner = json_errors(handler)

    async def handle(request: Request) -> Response:
        response: Response = await inner(request)
        if response.status_code >= 400 and isinstance(response, JSONResponse):
            said = json.loads(bytes(response.body))
            return _openai_error(response.status_code, said["error"], said.get("field"))
        return response

    return handle


def _openai_error(status: int, message: str, param: str | None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    code = {404: "not_found", 409: "conflict", 503: "unavailable"}.get(status)
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


def agent_for(gateway: GatewayContext, named: Mapping[str, AgentSpec], model: str) -> AgentSpec:
    """The spec ``model`` names: one of the agents, else the gateway's own."""
    if model in named:
        return gateway.needs_spec(model)
    try:
        return gateway.needs_spec(None)
    except HttpError:
        listed = ", ".join(sorted(named)) or "none"
        raise HttpError(404, f"no agent {model!r} here (agents: {listed})", "model") from None


def models_listing(named: Mapping[str, AgentSpec], has_default: bool) -> dict[str, Any]:
    """``GET /v1/models``: the agents, and the gateway's own spec."""
    names = sorted(named) + ([DEFAULT_MODEL] if has_default else [])
    data = [{"id": n, "object": "model", "created": 0, "owned_by": "durable-agent"} for n in names]
    return {"object": "list", "data": data}


def conversation_key(owner: str | None, model: str, first: str) -> str:
    """Part of a chat's session id: whose, which agent, how it began."""
    said = "\0".join([owner or "", model, first]).encode()
    return hashlib.sha256(said).hexdigest()[:16]


@dataclass
class Reply:
    """What a request waited for: the answer's text and usage, or the calls waiting for
    a person, or the session's end."""

    text: str = ""
    usage: Usage = field(default_factory=Usage)
    pending: list[PendingApproval] = field(default_factory=list)
    ended: str | None = None
    """Why the session ended without an answer (its error), if it did."""
    hosted: list[HostedCall] = field(default_factory=list)
    """The provider's own tools the model used for the answer (``HostedCall``)."""


async def follow_reply(
    gateway: GatewayContext, session_id: str, after: int, before: int
) -> AsyncIterator[LiveEvent | Reply]:
    """The session's events from ``after`` until it answers (more than ``before``
    messages), asks a person, or ends; then the ``Reply``. Its text deltas add up to
    the reply's text (``whole_answer``)."""
    async for step in whole_answer(_reply_events(gateway, session_id, after, before)):
        yield step


async def answer_now(reply: Reply) -> AsyncIterator[LiveEvent | Reply]:
    """A reply the session has given already, as the steps a stream shows: its text as
    one delta, then the ``Reply``."""

    async def given() -> AsyncIterator[LiveEvent | Reply]:
        yield reply

    async for step in whole_answer(given()):
        yield step


async def whole_answer(
    steps: AsyncIterator[LiveEvent | Reply],
) -> AsyncIterator[LiveEvent | Reply]:
    """``steps``, so that a streamed door shows the same answer an unstreamed one gives.

    A request sent again (after a decision, or a disconnect) reads the log from where
    it is now: the answer may be written already, or half-written (``from_call_start``
    has dropped the text of a call whose start this reader did not see). Whatever of
    the reply's text the deltas did not carry comes as one delta just before the
    ``Reply``. The streamed OpenAI endpoints read their text from here, so neither
    needs a rule of its own."""
    said: list[str] = []  # the text each model call streamed
    async for step in steps:
        if isinstance(step, ModelStarted | AttemptRestarted):
            said.append("")
        elif isinstance(step, TextDelta) and said:
            said[-1] += step.text
        elif isinstance(step, Reply) and (missing := _unsaid(step.text, said)):
            yield TextDelta(turn=0, text=missing)
        yield step


def _unsaid(answer: str, said: list[str]) -> str:
    """What of ``answer`` the deltas have not carried: nothing when a model call
    streamed it whole, the rest when the last call streamed its beginning, else all."""
    if not answer or answer in said:
        return ""
    last = said[-1] if said else ""
    return answer[len(last) :] if answer.startswith(last) else answer


async def _reply_events(
    gateway: GatewayContext, session_id: str, after: int, before: int
) -> AsyncIterator[LiveEvent | Reply]:
    agents = gateway.agents
    async for event in from_call_start(whole_replies(gateway.hubs.follow(session_id, after))):
        yield event
        if isinstance(event, Idle) and event.message_count > before:
            yield await answered(agents, session_id, before)
            return
        if isinstance(event, Ended):
            result = event.result
            error = event.error or (result.error if result is not None else None)
            reply = await answered(agents, session_id, before)
            reply.ended = error if error or not reply.text else None
            yield reply
            return
        if event.type == "approval_requested":
            yield Reply(pending=(await agents.session(session_id).status()).pending_approvals)
            return


async def answered(agents: AgentClient, session_id: str, before: int) -> Reply:
    """The answer after message ``before``: the last assistant text, and what the
    model calls for it used."""
    added = await agents.session(session_id).messages(before)
    return reply_of(added)


def reply_of(added: list[Message]) -> Reply:
    usage = Usage()
    text = ""
    hosted: list[HostedCall] = []
    for message in added:
        if isinstance(message, AssistantMessage):
            hosted += hosted_calls(message.provider_items)
            if message.usage is not None:
                usage = usage + message.usage
            if message.content and not message.tool_calls:
                text = message.content
    return Reply(text=text, usage=usage, hosted=hosted)


def text_deltas(step: LiveEvent | Reply) -> str:
    return step.text if isinstance(step, TextDelta) else ""


def waiting_text(session_id: str, pending: list[PendingApproval]) -> str:
    """A reply that waits for a person, as text any chat window shows: each call whole,
    and how to decide it (then the same message again reads the answer)."""
    base = f"/api/sessions/{session_id}/approvals"
    lines = [f"Waiting for a person to approve {len(pending)} call(s) before I go on:"]
    for p in pending:
        lines.append(f"- {p.for_approver()} (approval {p.approval_id})")
        if p.awaits_output:  # its output comes from outside: nothing to approve
            lines.append(
                f'  its output: POST {base}/{p.approval_id}/output {{"content": "..."}}, '
                f"deny: POST {base}/{p.approval_id}/deny"
            )
            continue
        lines.append(
            f"  approve: POST {base}/{p.approval_id}/approve, deny: POST {base}/{p.approval_id}"
            f"/deny, or `durable-agent approve {session_id} {p.approval_id}`"
        )
    lines.append("Once decided, send your last message again to read the answer.")
    return "\n".join(lines)


def approvals_extension(session_id: str, pending: list[PendingApproval]) -> dict[str, Any]:
    """The ``durable_agent`` field of a reply that waits for a person: the calls, and
    where to decide them (the gateway's REST API, as the caller)."""
    base = f"/api/sessions/{session_id}/approvals"
    return {
        "session_id": session_id,
        "pending_approvals": [
            {
                "approval_id": p.approval_id,
                "tool": p.tool_name,
                "arguments": p.arguments,
                "described": p.described_arguments,
                "approve": f"{base}/{p.approval_id}/approve",
                "deny": f"{base}/{p.approval_id}/deny",
            }
            for p in pending
        ],
    }
