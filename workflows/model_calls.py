"""Carrying out ``CallModel``: what a model call's input holds, and what comes back.

The input is lean: the session's model setup by digest (inline only on a run's first
call or for a worker that lacks it), the transcript by reference to what the
workers' store holds, and only the new messages. A store that lost what a call
referred to is refilled here; every other failure goes back to the Session.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any, cast

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts._contracts import ModelCallInput, ModelSetup, SummaryCallInput
    from durable_agent._contracts._digests import ModelReturn, WorkerLacks
    from durable_agent._failures import Failure
    from durable_agent._session import (
        ModelCancelled,
        ModelFailure,
        ModelOutcome,
        ModelReply,
        Purpose,
        Session,
        setup_digest,
    )
    from durable_agent._session._events import ModelCallSent, WaitingForCapacity
    from durable_agent._wire._messages import AssistantMessage, Usage

    from .reply_pages import calls_per_page, whole_message
    from .retries import LOST_WORK_RETRIES, gave_up_text, give_up_after
    from .transcript_sync import TranscriptSync, store_lost

#: Re-sends of one model call's transcript before the session fails: a store that loses
#: it again at once is not shared by the workers (or not kept), and retrying cannot help.
MAX_STORE_REFILLS = 2


#: Told when a call starts waiting for capacity on a limited endpoint (``True``) and when
#: the wait is over (``False``): turn, endpoint.
CapacityNotice = Callable[[int, str, bool], None]


#: What a model call that asks for digests answers: the reply with its digest, or what a
#: worker new to the session lacks (temporalio's ``result_type`` is typed as a class).
DIGESTED_ANSWER = cast(type, ModelReturn | WorkerLacks)


class ModelCaller:
    def __init__(
        self,
        session: Session,
        sync: TranscriptSync,
        *,
        send_setup: bool,
        on_capacity: CapacityNotice | None = None,
    ) -> None:
        self._session = session
        self._view = session.view
        self._sync = sync
        self._on_capacity = on_capacity
        self.tenant: str | None = None
        """Sent with each call where the workers limit endpoints (admission says so)."""
        self._setups: dict[str, tuple[ModelSetup, str]] = {}
        self._known: set[str] = set()
        """Digests of setups the workers are taken to hold (sent, or held from a run before);
        a call sends its setup inline unless its digest is here."""
        if not send_setup:  # a continued run: the workers have the session's setup
            self._known.add(self._model_setup()[1])

    def _model_setup(self, purpose: Purpose = "reply") -> tuple[ModelSetup, str]:
        """The active agent's model setup (or its summariser's) and its digest, built once
        a run for each."""
        key = self._view.setup_key(purpose)
        if key not in self._setups:
            setup = self._view.model_setup(purpose)
            most = calls_per_page() if purpose == "reply" else None
            if most is not None:  # a reply of thousands of calls comes in pages
                setup = setup.model_copy(update={"calls_per_page": most})
            self._setups[key] = (setup, setup_digest(setup))
        return self._setups[key]

    async def call(self, turn: int) -> ModelOutcome:
        name, agent = self._view.model_spec.name, self._view.agent_name
        if agent is not None:
            name = f"{agent} ({name})"
        summary = f"call_model {name} turn {turn}"
        return await self._request("call_model", turn, self._model_setup(), summary, {})

    async def summarise(self, turn: int, until: int) -> ModelOutcome:
        setup, digest = self._model_setup("summary")
        extra = {"until": until, "prompt": self._view.model_spec.context.summary_prompt}
        summary = f"summarise_context {setup.model} messages 0-{until}"
        return await self._request("summarise_context", turn, (setup, digest), summary, extra)

    async def _request(
        self,
        activity: str,
        turn: int,
        setup_and_digest: tuple[ModelSetup, str],
        summary: str,
        extra: dict[str, Any],
    ) -> ModelOutcome:
        """The call's outcome, with the tokens of attempts whose replies were lost."""
        unbilled: list[Usage] = []
        outcome = await self._attempts(activity, turn, setup_and_digest, summary, extra, unbilled)
        return replace(outcome, unbilled=tuple(unbilled)) if unbilled else outcome

    async def _attempts(
        self,
        activity: str,
        turn: int,
        setup_and_digest: tuple[ModelSetup, str],
        summary: str,
        extra: dict[str, Any],
        unbilled: list[Usage],
    ) -> ModelOutcome:
        model, rules = self._view.model_spec, self._session.spec.session
        setup, digest = setup_and_digest
        lost_store, waited = 0, False
        while True:
            send = digest not in self._known
            setup_bytes = len(setup.model_dump_json()) if send else 0
            await self._sync.store_pieces(until_inline_bytes=self._sync.capacity - setup_bytes)
            fields = {
                "turn": turn,
                "setup_digest": digest,
                "setup": setup if send else None,
                "transcript": self._sync.reference(),
                "messages": self._sync.new_messages(),
                "head": self._session.messages.head,
                "run_chain": workflow.info().first_execution_run_id,
                **({"tenant": self.tenant} if self.tenant is not None else {}),
                **({"waited": True} if waited else {}),
                **extra,
            }
            # a reply comes with its digest and size (chain 2): the array joins it as is
            digests = not extra and self._reply_digested()
            if digests:
                fields["digested"] = True
            reply_id = self._view.reply_id
            if reply_id is not None and not extra:
                fields["message_id"] = reply_id
            counted = digests and self._view.trimmed_by_workers
            if counted:
                fields["count_left_out"] = True
            if digests:  # a worker new to the session says what it lacks: no failure
                fields["asks_again"] = True
            call = SummaryCallInput(**fields) if extra else ModelCallInput(**fields)
            self._session.handle(ModelCallSent(), workflow.now())
            handle = workflow.start_activity(
                activity,
                call,
                result_type=DIGESTED_ANSWER if digests else AssistantMessage,
                start_to_close_timeout=timedelta(seconds=model.timeout_seconds),
                heartbeat_timeout=timedelta(seconds=rules.heartbeat_timeout_seconds),
                schedule_to_close_timeout=give_up_after(
                    model.timeout_seconds, rules.recovery_limit_seconds
                ),
                retry_policy=LOST_WORK_RETRIES,
                summary=summary,
            )
            await workflow.wait_condition(self._done_or_cancelled(handle))
            if not handle.done():
                handle.cancel()
                with contextlib.suppress(ActivityError, asyncio.CancelledError):
                    await handle
                return ModelCancelled()
            try:
                returned: AssistantMessage | ModelReturn | WorkerLacks = await handle
            except ActivityError as error:
                cause = error.cause
                kind = cause.type if isinstance(cause, ApplicationError) else None
                if kind == Failure.MODEL_SETUP_UNKNOWN and not send:
                    self._known.discard(digest)  # this worker lacks it: send it
                    continue
                if kind == Failure.CAPACITY_WAIT and isinstance(cause, ApplicationError):
                    if not await self._wait_for_capacity(turn, cause):
                        return ModelCancelled()
                    waited = True
                    continue  # (no attempt of the model was used)
                if kind == Failure.TRANSCRIPT_UNKNOWN and lost_store < MAX_STORE_REFILLS:
                    # the store lost what the call referred to: send it all again, once
                    lost_store += 1
                    self._sync.lost()
                    continue
                return failure(error, rules.recovery_limit_seconds)
            if isinstance(returned, WorkerLacks):  # a worker new to the session
                if ("setup" in returned.lacks and send) or (
                    "transcript" in returned.lacks and lost_store >= MAX_STORE_REFILLS
                ):
                    return ModelFailure(
                        Failure.TRANSCRIPT_UNKNOWN,
                        f"a worker lacks the session's {' and '.join(returned.lacks)} after "
                        "it was sent: do all workers share one transcript store?",
                    )
                if "setup" in returned.lacks:
                    self._known.discard(digest)
                if "transcript" in returned.lacks:
                    lost_store += 1
                    self._sync.lost()
                continue
            self._known.add(digest)
            if isinstance(returned, ModelReturn):
                reply, called = returned.message, None
                if returned.calls is not None:  # the rest of its calls, one page per workflow task
                    beat = timedelta(seconds=rules.heartbeat_timeout_seconds)
                    try:
                        reply, called = await whole_message(
                            reply, returned.digest, returned.calls, beat
                        )
                    except ActivityError as error:
                        if not store_lost(error) or lost_store >= MAX_STORE_REFILLS:
                            return failure(error, rules.recovery_limit_seconds)
                        # the store lost the reply before its pages were read (a pruned
                        # store, a ``memory:`` one whose worker restarted): it was billed,
                        # and the model is asked again
                        lost_store += 1
                        if reply.usage is not None:
                            unbilled.append(reply.usage)
                        continue
                self._session.messages.encode_ahead(reply, returned.digest, returned.size)
                return ModelReply(
                    reply,
                    left_out=(returned.left_out or 0) if counted else None,
                    files_left_out=tuple(returned.files_left_out or ()),
                    called=called,
                    arguments_checked=bool(returned.arguments_checked),
                )
            return ModelReply(returned)

    def _reply_digested(self) -> bool:
        """Whether the model call returns its reply's digest and size (a session in the
        transcript's version-2 hash chain, on today's code)."""
        return self._session.messages.takes_digests

    async def _wait_for_capacity(self, turn: int, cause: ApplicationError) -> bool:
        """Wait durably until the endpoint's limiter keeps capacity for the call (or, if no
        word comes, for its patience, then ask again); ``False``: the turn was cancelled."""
        session, view = self._session, self._view
        key, patience = str(cause.details[0]), float(cause.details[1])
        session.handle(WaitingForCapacity(key), workflow.now())
        if self._on_capacity is not None:
            self._on_capacity(turn, key, True)
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: view.capacity_ready or view.cancelling,
                timeout=timedelta(seconds=patience),
            )
        session.handle(WaitingForCapacity(None), workflow.now())
        if view.cancelling:
            return False
        if self._on_capacity is not None:
            self._on_capacity(turn, key, False)
        return True

    def _done_or_cancelled(self, handle: asyncio.Future[Any]) -> Callable[[], bool]:
        view = self._view
        return lambda: handle.done() or view.cancelling

    def replied(self, before: int, reply: AssistantMessage | None = None) -> None:
        """The call's worker stored the ``before`` messages it was sent and, if the array
        now holds ``reply`` unchanged right after them, the reply too (a rescue or a
        guardrail may add other messages, or hold the reply back)."""
        messages = self._session.messages
        kept = reply is not None and len(messages) > before and messages[before] is reply
        self._sync.stored_through(before + 1 if kept else before)
        self._sync.offered = max(self._sync.offered, before)  # the call fed them to a log


def failure(error: ActivityError, recovery_limit: float | None) -> ModelFailure:
    cause = error.cause
    if isinstance(cause, ApplicationError):
        text = cause.message
        if cause.type == Failure.TRANSCRIPT_UNKNOWN:
            text += " (the transcript store lost it again: do all workers share one?)"
        return ModelFailure(cause.type, text, cause.next_retry_delay)
    if isinstance(cause, ActivityTimeout):
        return ModelFailure(None, gave_up_text("the model call", recovery_limit))
    return ModelFailure(None, str(error))
