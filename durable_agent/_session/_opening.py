"""How a fresh session's conversation opens: the active agent's instructions, the given
history, and the first message (queued for the input guardrails when there are any)."""

from __future__ import annotations

from datetime import datetime

from durable_agent._spec._spec import AgentInput, AgentSpec
from durable_agent._wire._messages import SystemMessage, UserMessage
from durable_agent._wire._transcript import Transcript, kept_apart

from ._loop_rules import epoch_ms


def open_conversation(
    spec: AgentSpec,
    messages: Transcript,
    request: AgentInput,
    agent: tuple[str | None, str | None],
    now: datetime,
) -> UserMessage | None:
    """Fill the array (empty, or an ended run's when resuming); the first message when
    input guardrails check it before it joins. The history given joins exactly as
    given (as a long one read back from the store does); what the session adds gets
    its stable id. ``agent``: the name and instructions of a
    swarm's first agent (``None, None`` for one agent)."""
    at = epoch_ms(now)
    name = agent[0]
    system = instructions_message(spec, agent, now)
    if system is not None and not messages:  # a resumed conversation has its own already
        messages.join(system)
    history = list(request.history)
    first = request.message
    if isinstance(first, str):
        first = UserMessage(content=first)
    if first is not None:
        first = kept_apart(first).model_copy(
            update={"timestamp": at, "agent_name": name, "mode": first.mode or "user"}
        )
    guarded = bool(spec.guardrails.input)
    last = history[-1] if history else None
    if guarded and first is None and isinstance(last, UserMessage):
        history.pop()  # the message that starts the turn is checked first
        first = kept_apart(last)
    messages.extend(history)  # a history given is kept exactly as given
    if first is not None and guarded:
        return first
    if first is not None:
        messages.join(first)
    return None


def instructions_message(
    spec: AgentSpec, agent: tuple[str | None, str | None], now: datetime
) -> SystemMessage | None:
    """The system message a fresh conversation opens with (none without instructions)."""
    name, agent_instructions = agent
    instructions = agent_instructions if name is not None else spec.instructions
    if not instructions:
        return None
    return SystemMessage(content=instructions, timestamp=epoch_ms(now), agent_name=name)
