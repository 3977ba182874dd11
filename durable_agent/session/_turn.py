"""The turn's own transitions, as plain functions of the Session: a message delivered,
an answer given, a turn ended without one, a guardrail's verdict, a cancellation or a
move applied, the session finished. ``Session`` (core.py) decides when; these say what
each does to its state."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from durable_agent.core import (
    AgentResult,
    AssistantMessage,
    GuardrailVerdict,
    ToolMessage,
    UserMessage,
    parse_structured_output,
)

from ._commands import Finish
from ._tool_results import cancel_text, guardrail_text

if TYPE_CHECKING:
    from ._core import Session

Reply = AssistantMessage | ToolMessage


def deliver(session: Session, messages: list[UserMessage]) -> None:
    """Queued messages join the array and start (or steer) a turn."""
    if session.swarm is not None:  # addressed to the agent answering
        messages = [m.model_copy(update={"agent_name": session.agent_name}) for m in messages]
    session.messages.extend(messages)
    if session.state.stage == "idle":
        session.state.model_calls_this_reply = 0
        session.state.rescues_this_reply = 0
    session.state.stage = "model"
    session.phase = "calling_model"  # busy from here (a continue-as-new may come first)
    session.reply, session.turn_failed = None, None


def end_turn(session: Session, reason: str, error: str) -> None:
    """The turn is over without an answer (a guardrail, a cancellation)."""
    session.state.stage = "idle"
    session.reply, session.reply_reason = None, reason
    session.state.last_error = session.turn_failed = error


def replied(session: Session, reply: Reply, reason: str) -> None:
    """The model's answer to the latest message is complete: the session goes idle."""
    session.state.stage = "idle"
    session.reply, session.reply_reason = reply, reason
    session.structured = None
    schema = session.spec.output_schema
    if schema is not None and isinstance(reply, AssistantMessage) and not reply.is_error:
        parsed = parse_structured_output(reply.content, schema)
        session.structured = parsed.value
        if parsed.error:
            session.state.last_error = f"structured output: {parsed.error}"


def guardrail_verdict(
    session: Session, verdict: GuardrailVerdict | None, failure: str | None = None
) -> None:
    """The verdict on the message or answer being checked (``failure``: the guardrail
    kept failing; the turn fails closed with its words)."""
    allowed = verdict is not None and verdict.allowed
    reason = failure or (verdict.reason if verdict else None) or "denied"
    if session.held is not None:
        answer, session.held = session.held, None
        if allowed:
            session.messages.append(answer)
            replied(session, answer, "final_answer")
            return
        session.messages.append(answer.model_copy(update={"blocked": reason}))
        end_turn(session, "guardrail", guardrail_text("output", verdict, reason))
        return
    message, session.checking = session.checking, None
    assert message is not None
    if allowed:
        deliver(session, [message])
        return
    session.messages.append(message.model_copy(update={"blocked": reason}))
    text = guardrail_text("input", verdict, reason)
    if session.state.stage == "idle":
        end_turn(session, "guardrail", text)
    else:
        session.state.last_error = text  # a steering message: the turn goes on without it


def apply_cancel(session: Session, now: datetime) -> None:
    """A ``cancel_turn``, at a safe point: a batch's unrun calls get results saying so,
    a turn waiting for the model ends."""
    state = session.state
    request = state.cancel
    assert request is not None
    why = cancel_text(request.by, request.reason)
    if state.stage == "tools":
        last = session.messages[-1]
        assert isinstance(last, AssistantMessage)
        session.batch.cancel(last, why, now)
        session.tools_finished({}, now)
    state.cancel = None
    if state.stage == "model":
        end_turn(session, "cancelled", why)
    else:
        session.requests.reject(f"cancel_turn: the turn had ended before {why}")


def apply_move(session: Session) -> None:
    """Between turns or model calls (never in a tool batch or a model call)."""
    state = session.state
    assert session.swarm is not None and state.move is not None
    if state.move.agent != session.swarm.active:
        session.swarm.go_to(state.move.agent)
    state.move = None


def finish(
    session: Session,
    status: Any,
    stop_reason: str,
    *,
    final: Reply | None = None,
    error: str | None = None,
) -> Finish:
    """The session's end: its result (a structured output only with its own reply)."""
    state = session.state
    if status == "failed":
        state.last_error = error
    elif state.last_error and state.last_error.startswith("structured output:"):
        error = state.last_error
    session.phase = status
    return Finish(
        AgentResult(
            status=status,
            stop_reason=stop_reason,
            final=final,
            structured_output=session.structured if final is session.reply else None,
            error=error,
            turns=state.turn,
            message_count=len(session.messages),
            usage=state.usage,
            spend=dict(state.spend),
        )
    )
