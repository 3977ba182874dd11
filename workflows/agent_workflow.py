"""AgentWorkflow: one session, one conversation, carried out on Temporal.

Every rule lives in the pure ``Session`` (``durable_agent._session``): it says what to
do next and takes the outcome back. This class opens the run (reads its input, has the
spec admitted, opens or carries the conversation), then has ``carry_out`` do the
Session's commands through ``SessionEffects``; its entry points (``SessionHandlers``) record
signals and updates into the Session and answer queries from it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.boundary import WORKFLOW_NAME, AgentResult
    from durable_agent._errors import Failure, PayloadTooLarge
    from durable_agent._session import Compatibility, Session, carry_out
    from durable_agent._session.protocol import Admitted
    from durable_agent._spec.document import AgentInput, AgentSpec, ModelSpec

    from .checks import admit, refuse_forged_carry
    from .continuation import ContinuedInput
    from .effects import SessionEffects
    from .handlers import SessionHandlers, WakeUpHandlers
    from .live_feed import LiveFeed
    from .model_calls import ModelCaller
    from .patches import APPROVALS_IN_PAGES_PATCH, PREVIOUS_BASELINE, retired
    from .starting import (
        InvalidInput,
        decode_start,
        events_carried,
        open_run,
        reading_back,
        run_state,
    )
    from .telemetry import session_log
    from .transcript_sync import TranscriptSync

#: Stands in for the spec of a session whose input could not be read (it fails at once).
PLACEHOLDER_SPEC = AgentSpec(model=ModelSpec(name="invalid-input"))


# a versioned worker pins it (``versioned``): a run never replays on another build, and
# moves by continue-as-new (no annotation: unversioned workers may not carry one)
@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)  # see durable_agent.temporal._plugin
class AgentWorkflow(SessionHandlers, WakeUpHandlers):
    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        retired(PREVIOUS_BASELINE)  # the first command of the previous release's runs
        self._invalid_input: str | None = None
        try:
            request: AgentInput | ContinuedInput = decode_start(raw)
        except InvalidInput as error:  # run() fails the session with this text
            self._invalid_input = str(error)
            request = AgentInput.model_construct(spec=PLACEHOLDER_SPEC)
        self._request = request
        state = run_state(request)
        # the previous release's runs recorded a marker where approvals went in pages
        compatibility = Compatibility(approvals_in_pages=lambda: retired(APPROVALS_IN_PAGES_PATCH))
        # signed decisions are bound to the run that asked (a reset asks anew) and
        # revocations to the session's run chain (new for a new session)
        info = workflow.info()
        self._session = session = Session(
            request.spec,
            state,
            compatibility,
            run_chain=info.first_execution_run_id,
            run=info.run_id,
        )
        self._feed = LiveFeed(WorkflowStream(events_carried(request)), session)
        self._reading_back = reading_back(request)
        rules = request.spec.session
        self._sync = TranscriptSync(
            session.messages,
            state.stored_count,
            rules.payload_budget_bytes,
            timedelta(seconds=rules.heartbeat_timeout_seconds),
        )
        # a fresh session's first call seeds the workers' cache with the model setup
        self._model = ModelCaller(
            session,
            self._sync,
            send_setup=isinstance(request, AgentInput),
            on_capacity=self._feed.capacity,
        )

    @workflow.run
    async def run(self, raw: RawValue) -> AgentResult:
        try:
            return await self._run()
        except ApplicationError as error:
            self._feed.ended(None, error.message)
            raise

    async def _run(self) -> AgentResult:
        if self._invalid_input is not None:
            raise ApplicationError(
                f"invalid session input: {self._invalid_input}",
                type=Failure.INVALID_INPUT,
                non_retryable=True,
            )
        request, session = self._request, self._session
        carried = isinstance(request, ContinuedInput)
        refuse_forged_carry(carried)
        # the worker's registries decide what the spec may use, and the server's record
        # whether carried state came from the session's own previous run
        admission = await admit(request.spec, carried)
        self._sync.payload_store_bytes = admission.payload_store_bytes
        self._sync.logged = admission.message_log
        session.handle(Admitted(admission.prices), workflow.now())
        if admission.limited:  # shared limits count calls by whose they are
            self._model.tenant = workflow.memo_value("owner", "", type_hint=str)
        untitled = False
        if isinstance(request, AgentInput):
            untitled = await open_run(session, request, self._sync)
        else:
            if request.carried.transcript is not None:
                await self._sync.load_carried(request.carried.transcript)
            self._feed.resume()
        effects = SessionEffects(session, self._feed, self._sync, self._model, untitled=untitled)
        try:
            result = await carry_out(session, effects)
        except PayloadTooLarge as error:
            result = session.fail(str(error))
        offset = self._feed.ended(result)
        result = result.model_copy(update={"events_offset": offset})
        session_log(
            session, logging.INFO, "session ended: %s (%s)", result.status, result.stop_reason
        )
        return result
