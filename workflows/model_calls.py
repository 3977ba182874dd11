"""Carrying out ``CallModel``: what a model call's input holds, and what comes back.

The input is lean: the session's model setup by digest (inline only on a run's first
call or for a worker that lacks it), the transcript by reference to what the
workers' store holds, and only the new messages. What to do when an attempt comes
back without a reply (send the setup, wait for capacity, refill the store, ask again)
is decided by the pure delivery rules (``durable_agent/_session/model_call.py``); this
file only carries their answers out with Temporal's calls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, cast

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.boundary import (
        ModelCallInput,
        ModelReturn,
        ModelSetup,
        SummaryCallInput,
        WorkerLacks,
    )
    from durable_agent._session import (
        ModelCancelled,
        ModelOutcome,
        ModelReply,
        Purpose,
        Session,
        setup_digest,
    )
    from durable_agent._session.model_call import (
        Delivery,
        Failed,
        GiveUp,
        Lacks,
        PagesLost,
        SendAgain,
        Trouble,
        WaitForCapacity,
    )
    from durable_agent._session.protocol import ModelCallSent, WaitingForCapacity
    from durable_agent._wire.messages import AssistantMessage

    from .retries import LOST_WORK_RETRIES, gave_up_text, give_up_after
    from .transcript_sync import TranscriptSync, calls_per_page, whole_message

#: Told when a call starts waiting for capacity on a limited endpoint (``True``) and when
#: the wait is over (``False``): turn, endpoint.
CapacityNotice = Callable[[int, str, bool], None]


#: What a model call that asks for digests answers: the reply with its digest, or what a
#: worker new to the session lacks (temporalio's ``result_type`` is typed as a class).
DIGESTED_ANSWER = cast(type, ModelReturn | WorkerLacks)


@dataclass(frozen=True)
class _Call:
    """One model call: the same for each of its attempts."""

    activity: str
    turn: int
    setup: ModelSetup
    digest: str
    summary: str
    extra: dict[str, Any]
    """What a summary call adds (empty for a reply)."""


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
        key = self._view.model.setup_key(purpose)
        if key not in self._setups:
            setup = self._view.model.setup(purpose)
            most = calls_per_page() if purpose == "reply" else None
            if most is not None:  # a reply of thousands of calls comes in pages
                setup = setup.model_copy(update={"calls_per_page": most})
            self._setups[key] = (setup, setup_digest(setup))
        return self._setups[key]

    async def call(self, turn: int) -> ModelOutcome:
        name, agent = self._view.model.spec.name, self._view.model.agent_name
        if agent is not None:
            name = f"{agent} ({name})"
        setup, digest = self._model_setup()
        summary = f"call_model {name} turn {turn}"
        return await self._request(_Call("call_model", turn, setup, digest, summary, {}))

    async def summarise(self, turn: int, until: int) -> ModelOutcome:
        setup, digest = self._model_setup("summary")
        extra = {"until": until, "prompt": self._view.model.spec.context.summary_prompt}
        summary = f"summarise_context {setup.model} messages 0-{until}"
        return await self._request(_Call("summarise_context", turn, setup, digest, summary, extra))

    async def _request(self, call: _Call) -> ModelOutcome:
        """The call's outcome, with the tokens of replies that were paid for and lost."""
        delivery = Delivery(setup_known=call.digest in self._known)
        try:
            outcome = await self._deliver(call, delivery)
        finally:  # what the attempts showed of the workers' setups holds for later calls
            if delivery.setup_known:
                self._known.add(call.digest)
            else:
                self._known.discard(call.digest)
        unbilled = tuple(delivery.unbilled)
        return replace(outcome, unbilled=unbilled) if unbilled else outcome

    async def _deliver(self, call: _Call, delivery: Delivery) -> ModelOutcome:
        """Attempt the call until it replies, is cancelled, or the delivery rules give up."""
        while True:
            returned = await self._attempt(call, delivery)
            if isinstance(returned, ModelReply | ModelCancelled):
                return returned
            decision = delivery.after(returned)
            match decision:
                case GiveUp():
                    return decision.failure
                case WaitForCapacity():
                    if not await self._wait_for_capacity(call.turn, decision):
                        return ModelCancelled()
                case SendAgain():
                    if decision.refill_store:
                        self._sync.lost()

    async def _attempt(
        self, call: _Call, delivery: Delivery
    ) -> ModelReply | ModelCancelled | Trouble:
        """One attempt of the call: its reply, or what it ran into."""
        model, rules = self._view.model.spec, self._session.spec.session
        send = delivery.setup_inline
        setup_bytes = len(call.setup.model_dump_json()) if send else 0
        await self._sync.store_pieces(until_inline_bytes=self._sync.capacity - setup_bytes)
        fields = {
            "turn": call.turn,
            "setup_digest": call.digest,
            "setup": call.setup if send else None,
            "transcript": self._sync.reference(),
            "messages": self._sync.new_messages(),
            "head": self._session.messages.head,
            "run_chain": workflow.info().first_execution_run_id,
            **({"tenant": self.tenant} if self.tenant is not None else {}),
            **({"waited": True} if delivery.waited else {}),
            **call.extra,
        }
        # a reply comes with its digest and size (chain 2): the array joins it as is
        digests = not call.extra and self._reply_digested()
        if digests:
            fields["digested"] = True
        reply_id = self._view.model.reply_id
        if reply_id is not None and not call.extra:
            fields["message_id"] = reply_id
        counted = digests and self._view.model.trimmed_by_workers
        if counted:
            fields["count_left_out"] = True
        if digests:  # a worker new to the session says what it lacks: no failure
            fields["asks_again"] = True
        call_input = SummaryCallInput(**fields) if call.extra else ModelCallInput(**fields)
        self._session.handle(ModelCallSent(), workflow.now())
        handle = workflow.start_activity(
            call.activity,
            call_input,
            result_type=DIGESTED_ANSWER if digests else AssistantMessage,
            start_to_close_timeout=timedelta(seconds=model.timeout_seconds),
            heartbeat_timeout=timedelta(seconds=rules.heartbeat_timeout_seconds),
            schedule_to_close_timeout=give_up_after(
                model.timeout_seconds, rules.recovery_limit_seconds
            ),
            retry_policy=LOST_WORK_RETRIES,
            summary=call.summary,
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
            return failed(error, rules.recovery_limit_seconds)
        if isinstance(returned, WorkerLacks):  # a worker new to the session
            return Lacks(tuple(returned.lacks))
        delivery.delivered()
        if not isinstance(returned, ModelReturn):
            return ModelReply(returned)
        reply, called = returned.message, None
        if returned.calls is not None:  # the rest of its calls, one page per workflow task
            beat = timedelta(seconds=rules.heartbeat_timeout_seconds)
            try:
                reply, called = await whole_message(reply, returned.digest, returned.calls, beat)
            except ActivityError as error:
                return PagesLost(failed(error, rules.recovery_limit_seconds), reply.usage)
        self._session.messages.encode_ahead(reply, returned.digest, returned.size)
        return ModelReply(
            reply,
            left_out=(returned.left_out or 0) if counted else None,
            files_left_out=tuple(returned.files_left_out or ()),
            called=called,
            arguments_checked=bool(returned.arguments_checked),
        )

    def _reply_digested(self) -> bool:
        """Whether the model call returns its reply's digest and size (a session in the
        transcript's version-2 hash chain, on today's code)."""
        return self._session.messages.takes_digests

    async def _wait_for_capacity(self, turn: int, wait: WaitForCapacity) -> bool:
        """Wait durably until the endpoint's limiter keeps capacity for the call (or, if no
        word comes, for its patience, then ask again); ``False``: the turn was cancelled."""
        session, view, key = self._session, self._view, wait.endpoint
        session.handle(WaitingForCapacity(key), workflow.now())
        if self._on_capacity is not None:
            self._on_capacity(turn, key, True)
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: view.loop.capacity_ready or view.loop.cancelling,
                timeout=timedelta(seconds=wait.patience),
            )
        session.handle(WaitingForCapacity(None), workflow.now())
        if view.loop.cancelling:
            return False
        if self._on_capacity is not None:
            self._on_capacity(turn, key, False)
        return True

    def _done_or_cancelled(self, handle: asyncio.Future[Any]) -> Callable[[], bool]:
        view = self._view
        return lambda: handle.done() or view.loop.cancelling

    def replied(self, before: int, reply: AssistantMessage | None = None) -> None:
        """The call's worker stored the ``before`` messages it was sent and, if the array
        now holds ``reply`` unchanged right after them, the reply too (a rescue or a
        guardrail may add other messages, or hold the reply back)."""
        messages = self._session.messages
        kept = reply is not None and len(messages) > before and messages[before] is reply
        self._sync.stored_through(before + 1 if kept else before)
        self._sync.offered = max(self._sync.offered, before)  # the call fed them to a log


def failed(error: ActivityError, recovery_limit: float | None) -> Failed:
    """What a failed activity tells the delivery rules."""
    cause = error.cause
    if isinstance(cause, ApplicationError):
        details = tuple(cause.details)
        return Failed(cause.type, cause.message, cause.next_retry_delay, details)
    if isinstance(cause, ActivityTimeout):
        return Failed(None, gave_up_text("the model call", recovery_limit))
    return Failed(None, str(error))
