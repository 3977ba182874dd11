"""Carrying out ``CallModel``: what a model call's input holds, and what comes back.

The input is lean: the session's model setup by digest (inline only on a run's first
call or for a worker that lacks it), the transcript by reference to what the
workers' store holds, and only the new messages. A store that lost what a call
referred to is refilled here; every other failure goes back to the Session.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from durable_agent.contracts import (
        MODEL_SETUP_UNKNOWN,
        TRANSCRIPT_UNKNOWN,
        ModelCallInput,
        ModelSetup,
    )
    from durable_agent.messages import AssistantMessage
    from workflows.retries import LOST_WORK_RETRIES, gave_up_text, give_up_after
    from workflows.session import Session
    from workflows.transcript_sync import TranscriptSync
    from workflows.turn_logic import setup_digest

#: Re-sends of one model call's transcript before the session fails: a store that loses
#: it again at once is not shared by the workers (or not kept), and retrying cannot help.
MAX_STORE_REFILLS = 2


@dataclass(frozen=True)
class ModelCallFailed:
    kind: str | None
    """The error type the activity reported (``None`` for a timeout or a cancellation)."""
    text: str
    retry_after: timedelta | None = None


class ModelCaller:
    def __init__(self, session: Session, sync: TranscriptSync, *, send_setup: bool) -> None:
        self._session = session
        self._sync = sync
        self._send_setup = send_setup
        self._setup: tuple[ModelSetup, str] | None = None

    def _model_setup(self) -> tuple[ModelSetup, str]:
        """The session's model setup and its digest (built once a run)."""
        if self._setup is None:
            spec = self._session.spec
            setup = ModelSetup(
                endpoint=spec.model.endpoint,
                model=spec.model.name,
                options=spec.model.options,
                reasoning=spec.model.reasoning,
                stream=spec.model.stream,
                output_schema=spec.output_schema,
                tools=[t.definition for t in self._session.tools.values()],
            )
            self._setup = (setup, setup_digest(setup))
        return self._setup

    async def call(self, turn: int) -> AssistantMessage | ModelCallFailed:
        spec = self._session.spec
        model, rules = spec.model, spec.session
        setup, digest = self._model_setup()
        lost_store = 0
        while True:
            setup_bytes = len(setup.model_dump_json()) if self._send_setup else 0
            await self._sync.store_pieces(until_inline_bytes=self._sync.room - setup_bytes)
            call = ModelCallInput(
                turn=turn,
                setup_digest=digest,
                setup=setup if self._send_setup else None,
                transcript=self._sync.reference(),
                messages=self._sync.new_messages(),
                head=self._session.messages.head,
            )
            try:
                assistant: AssistantMessage = await workflow.execute_activity(
                    "call_model",
                    call,
                    result_type=AssistantMessage,
                    start_to_close_timeout=timedelta(seconds=model.timeout_seconds),
                    heartbeat_timeout=timedelta(seconds=rules.heartbeat_timeout_seconds),
                    schedule_to_close_timeout=give_up_after(
                        model.timeout_seconds, rules.recovery_limit_seconds
                    ),
                    retry_policy=LOST_WORK_RETRIES,
                    summary=f"call_model {model.name} turn {turn}",
                )
            except ActivityError as error:
                cause = error.cause
                kind = cause.type if isinstance(cause, ApplicationError) else None
                if kind == MODEL_SETUP_UNKNOWN and not self._send_setup:
                    self._send_setup = True  # this worker lacks it: send it once
                    continue
                if kind == TRANSCRIPT_UNKNOWN and lost_store < MAX_STORE_REFILLS:
                    # the store lost what the call referred to: send it all again, once
                    lost_store += 1
                    self._sync.lost()
                    continue
                return failure(error, rules.recovery_limit_seconds)
            self._send_setup = False
            return assistant

    def replied(self) -> None:
        """The reply is in the array: the worker's store holds all of it now."""
        self._sync.all_stored()


def failure(error: ActivityError, recovery_limit: float | None) -> ModelCallFailed:
    cause = error.cause
    if isinstance(cause, ApplicationError):
        text = cause.message
        if cause.type == TRANSCRIPT_UNKNOWN:
            text += " (the transcript store lost it again: do all workers share one?)"
        return ModelCallFailed(cause.type, text, cause.next_retry_delay)
    if isinstance(cause, ActivityTimeout):
        return ModelCallFailed(None, gave_up_text("the model call", recovery_limit))
    return ModelCallFailed(None, str(error))
