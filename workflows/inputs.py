"""Reading what people send a session (its start input and signals) without trusting it.

Inputs arrive raw and are validated here, so a bad payload becomes a clear, visible
rejection (a failed start naming each field, or an entry in ``status``) instead of a
workflow task that fails and retries for ever, or a signal the SDK drops silently.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from durable_agent._errors import DurableAgentError
    from durable_agent._spec._spec import AgentInput
    from durable_agent._wire._contract import explain

    from .continued_input import ContinuedInput


class InvalidInput(DurableAgentError, ValueError):
    """The payload could not be read as what it should be; the text says why."""


def decode(raw: RawValue, as_type: Any) -> Any:
    """The payload as ``as_type``, or ``InvalidInput`` naming each bad field."""
    try:
        return workflow.payload_converter().from_payload(raw.payload, as_type)
    except Exception as error:  # invalid JSON, bad UTF-8, wrong fields or types
        raise InvalidInput(explain(error)) from None


def decode_start(raw: RawValue) -> AgentInput | ContinuedInput:
    """A run's input: a fresh session as users write it, or the state a previous run of
    the same session handed over (``carried``).

    One pass from JSON to the model when the bytes say which it is: a continued run's
    input that names ``carried``, or an input that names it nowhere. (Two passes, JSON
    to a dict and the dict to the model, took half as long again for a start carrying
    10,000 messages, in one workflow task.) Anything else, and an input that does not
    read in one pass, takes the two, which name each bad field."""
    named = b'"carried"' in raw.payload.data
    continued = workflow.info().continued_run_id is not None
    guess: type[AgentInput | ContinuedInput] | None = (
        AgentInput if not named else ContinuedInput if continued else None
    )
    if guess is not None:
        try:
            read: AgentInput | ContinuedInput = workflow.payload_converter().from_payload(
                raw.payload, guess
            )
            return read
        except ValueError:  # not what it seemed: the checked path says why
            pass
    return _decode_start_checked(raw)


def _decode_start_checked(raw: RawValue) -> AgentInput | ContinuedInput:
    data: dict[str, Any] = decode(raw, dict[str, Any])
    try:
        if data.get("carried") is not None:
            return ContinuedInput.model_validate(data)
        data.pop("carried", None)
        return AgentInput.model_validate(data)
    except ValidationError as error:
        raise InvalidInput(explain(error)) from None
