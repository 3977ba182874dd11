"""What the Session shows of itself: its status (the ``status`` query) and the setup its
model calls share. Read-only views of the state; they decide nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from durable_agent.core import (
    AssistantMessage,
    Message,
    ModelInputs,
    ModelSetup,
    SessionStatus,
    prepare_request_messages,
)

if TYPE_CHECKING:
    from ._core import Session

Purpose = Literal["reply", "summary"]


def model_setup(session: Session, purpose: Purpose = "reply") -> ModelSetup:
    """What the active agent's model calls share (sent once, then by digest): its model,
    options and tools; for a swarm, also its name and prompt."""
    model, swarm = session.model_spec, session.swarm
    inputs = None if model.inputs == ModelInputs() else model.inputs  # unset: hashes as before
    if purpose == "summary":
        return ModelSetup(
            endpoint=model.endpoint,
            model=model.context.summary_model or model.name,
            options=model.options,
            reasoning=model.reasoning,
            stream=False,
            inputs=inputs,
        )
    return ModelSetup(
        endpoint=model.endpoint,
        model=model.name,
        options=model.options,
        reasoning=model.reasoning,
        stream=model.stream,
        output_schema=session.spec.output_schema,
        tools=[t.definition for t in session.active_tools.values()],
        context=session.step.squeeze or (model.context if model.context.budget_tokens else None),
        agent=None if swarm is None else swarm.active,
        instructions=None if swarm is None else swarm.agent.instructions,
        # a reply hook rewrites the reply: its raw text must not stream to readers first
        live=session.spec.session.live_deltas and not session.spec.hooks.reply,
        inputs=inputs,
        hooks=session.spec.hooks if session.spec.hooks.names() else None,
        price=session.price,
    )


#: Waiting calls ``status`` lists at most: a batch of thousands would pass the 2 MB a
#: query's answer may carry (``AgentClient.pending_approvals`` reads all, in pages).
STATUS_PENDING_SHOWN = 1000


def session_status(session: Session) -> SessionStatus:
    state, messages, marks = session.state, session.messages, session.window_marks
    pending = session.decisions.pending_approvals()
    return SessionStatus(
        phase=session.phase,
        turn=state.turn,
        message_count=len(messages),
        pending_approvals=pending[:STATUS_PENDING_SHOWN],
        pending_count=len(pending),
        usage=state.usage,
        spend=dict(state.spend),
        last_error=state.last_error,
        rejected_signals=list(state.rejected_signals),
        queued_messages=len(state.inbox),
        runs=state.runs,
        cancel_pending=state.cancel is not None,
        flushes_pending=len(state.flushes),
        compacted=marks.counted(messages, marks.window(messages)[0]),
        budget=session.budget.status(),
        trimmed=session.trimmed,
        grants=list(state.grants),
        agent=session.agent_name,
        agent_stack=list(state.agent_stack),
        agents=session.spec.agent_names(),
        move_pending=state.move.agent if state.move is not None else None,
        finish_reason=latest_finish_reason(messages),
        waiting_for_capacity=session.waiting_for_capacity,
        upgrade=session.spec.session.upgrade,
        move_requested=state.move_to_current,
    )


def latest_finish_reason(messages: Sequence[Message]) -> str | None:
    """How the model's latest turn ended, as the provider said."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return message.finish_reason
    return None


def trimmed_count(session: Session) -> int:
    """Messages the request about to be made leaves out to fit the context budget."""
    rules = session.step.squeeze or session.model_spec.context
    if rules.budget_tokens is None:
        return 0
    return prepare_request_messages(session.messages, rules).left_out
