"""AgentWorkflow: one session, one conversation, carried out on Temporal.

Every rule lives in the pure ``Session`` (durable_agent/session/): it says what to do
next and takes the outcome back. This class only carries its commands out (activities,
durable waits, continue-as-new), records signals into it and answers queries from it.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import timedelta
from typing import assert_never

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent.core import (
        WORKFLOW_NAME,
        AgentInput,
        AgentResult,
        AgentSpec,
        AssistantMessage,
        ModelSpec,
        session_title,
    )
    from durable_agent.session import (
        AwaitApprovals,
        CallModel,
        CheckApprovals,
        CheckGuardrails,
        ContinueAsNew,
        DescribeCalls,
        Finish,
        NotifyEscalation,
        Pause,
        RunTools,
        Session,
        Summarise,
        VerifyTokens,
        WaitForMessage,
    )

    from .admission import admit, refuse_forged_carry
    from .approval_steps import check_approvals, describe_calls, notify_escalation, verify_tokens
    from .approval_wait import wait_for_decisions
    from .child_reports import report_to_parent
    from .continuation import hand_over
    from .continued_input import ContinuedInput
    from .fresh_run import events_carried, open_run, reading_back, run_state
    from .handlers import SessionHandlers
    from .inputs import InvalidInput, decode_start
    from .live_feed import LiveFeed
    from .model_calls import ModelCallCancelled, ModelCaller, ModelCallFailed
    from .patches import APPROVALS_IN_PAGES_PATCH, Patches
    from .session_log import session_log
    from .tool_calls import EncodedOnArrival, check_guardrails, run_tool_groups
    from .transcript_sync import PayloadTooLarge, TranscriptSync

#: Patch ids (workflow.patched; never reuse or rename).
MODEL_RESCUE_PATCH = "model-rescue"
#: A runaway turn or a model that failed for good ends the turn (it ended the session).
TURN_FAILURES_PATCH = "turn-failures-end-turns"
#: A request the model refused as too long is tried again, shorter (it failed the turn).
CONTEXT_OVERFLOW_PATCH = "context-overflow-trims"
#: A session moves to the build made current at a turn boundary (it stayed on its own).
MOVE_TO_CURRENT_PATCH = "move-to-current-build"
#: Stands in for the spec of a session whose input could not be read (it fails at once).
PLACEHOLDER_SPEC = AgentSpec(model=ModelSpec(name="invalid-input"))


# a versioned worker pins it (``versioned``): a run never replays on another build, and
# moves by continue-as-new (no annotation: unversioned workers may not carry one)
@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)  # see durable_agent.temporal._sandbox
class AgentWorkflow(SessionHandlers):
    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        self.patches = Patches()  # before anything asks a patch
        self._invalid_input: str | None = None
        self._untitled = False
        self._moves = False
        try:
            request: AgentInput | ContinuedInput = decode_start(raw)
        except InvalidInput as error:  # run() fails the session with this text
            self._invalid_input = str(error)
            request = AgentInput.model_construct(spec=PLACEHOLDER_SPEC)
        self._request = request
        state = run_state(request, self.patches)
        self._session = session = Session(request.spec, state)
        session.approvals.paged = lambda: self.patches(APPROVALS_IN_PAGES_PATCH)
        # signed decisions are bound to the session's run chain (new for a new session)
        session.decisions.run_chain = workflow.info().first_execution_run_id
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
                type="InvalidInput",
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
        session.budget.prices = admission.prices
        if admission.limited:  # shared limits count calls by whose they are
            self._model.tenant = workflow.memo_value("owner", "", type_hint=str)
        # Added after sessions were recorded: rescue changes what follows an unusable turn
        session.rescue_enabled = self.patches(MODEL_RESCUE_PATCH)
        session.turn_failures_end_turns = lambda: self.patches(TURN_FAILURES_PATCH)
        session.context_overflow_trims = lambda: self.patches(CONTEXT_OVERFLOW_PATCH)
        self._moves = self.patches(MOVE_TO_CURRENT_PATCH)
        if isinstance(request, AgentInput):
            self._untitled = await open_run(session, request, self._sync)
        else:
            if request.carried.transcript is not None:
                await self._sync.load_carried(request.carried.transcript)
            self._feed.resume()
        try:
            result = await self._carry_out_commands()
        except PayloadTooLarge as error:
            result = session.fail(str(error))
        offset = self._feed.ended(result)
        result = result.model_copy(update={"events_offset": offset})
        session_log(
            session, logging.INFO, "session ended: %s (%s)", result.status, result.stop_reason
        )
        return result

    async def _carry_out_commands(self) -> AgentResult:
        session, feed = self._session, self._feed
        while True:
            command = session.next_command(
                suggested=self._history_long(), now=workflow.now(), changed=self._build_changed()
            )
            await feed.caught_up()
            self._title_once_known()
            match command:
                case Finish():
                    await self._sync.store_for_log()
                    return command.result
                case ContinueAsNew():
                    await hand_over(session, self._sync, feed, upgrade=command.upgrade)
                case CallModel():
                    feed.model_call(command.turn)
                    outcome, sent = await self._model.call(command.turn), len(session.messages)
                    if isinstance(outcome, AssistantMessage):
                        session.model_replied(outcome)
                        self._model.replied(sent, outcome)
                        feed.model_replied(command.turn, outcome)
                    else:
                        self._model_failed(command.turn, outcome)
                case Summarise():
                    outcome = await self._model.summarise(command.turn, command.until)
                    if isinstance(outcome, AssistantMessage):
                        self._model.replied(len(session.messages))  # what it was made of
                        session.summarised(outcome, workflow.now())
                    else:
                        self._model_failed(command.turn, outcome)
                case CheckGuardrails():
                    verdict, failure = await check_guardrails(command, session.spec)
                    session.guardrails_checked(verdict, failure)
                case Pause():
                    await self._pause(command.delay)
                case CheckApprovals():
                    session.batch.approvals_checked(
                        await check_approvals(command, session.spec.session)
                    )
                case DescribeCalls():
                    session.batch.calls_described(
                        await describe_calls(command, session.spec.session)
                    )
                case VerifyTokens():
                    verdicts = await verify_tokens(command, session.spec.session)
                    session.decisions.tokens_checked(verdicts, workflow.now())
                case NotifyEscalation():
                    await notify_escalation(command, session.spec.session)
                    session.decisions.escalation_sent()
                case AwaitApprovals():
                    await report_to_parent(session.approvals)  # a sub-agent's show in its parent
                    await wait_for_decisions(
                        session.approvals,
                        command.ids,
                        session.batch.timeout_decision,
                        lambda: session.decisions.approval_wait_over(self._history_long()),
                    )
                    await feed.caught_up()  # decisions (deadlines' defaults) before they apply
                    session.batch.approvals_waited(workflow.now())
                    await report_to_parent(session.approvals)
                case RunTools():
                    rules = session.spec.session
                    await run_tool_groups(
                        command,
                        rules,
                        self._cancelled,
                        lambda: session.state.ending is not None,
                        session.state.forwards,
                        EncodedOnArrival(feed, session.messages, session.batch.arrived),
                        session.batch.children,
                        session.messages,
                        self._sync.stored_by_tool(first=len(session.messages)),
                    )
                    session.tools_finished({}, workflow.now())  # each placed as it arrived
                case WaitForMessage():
                    await self._sync.store_for_log()
                    await self._wait_for_message(command)

                case _:  # mypy proves every command has its case
                    assert_never(command)

    def _title_once_known(self) -> None:
        """A session started without a message is titled by the first one it gets."""
        if self._untitled and (title := session_title(self._session.messages)):
            self._untitled = False
            workflow.upsert_memo({"title": title})

    def _model_failed(self, turn: int, outcome: ModelCallFailed | ModelCallCancelled) -> None:
        if isinstance(outcome, ModelCallCancelled):
            self._session.model_cancelled()
            self._feed.model_failed(turn, "cancelled", "the turn was cancelled")
        else:
            self._session.model_failed(
                outcome.kind, outcome.text, outcome.retry_after, workflow.now()
            )
            self._feed.model_failed(turn, outcome.kind, outcome.text)

    def _cancelled(self) -> bool:
        return self._session.state.cancel is not None

    async def _pause(self, delay: timedelta) -> None:
        """A durable wait between attempts that a cancelled turn cuts short."""
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(self._cancelled, timeout=delay)

    async def _wait_for_message(self, command: WaitForMessage) -> None:
        try:
            await workflow.wait_condition(
                lambda: self._session.idle_wait_over(self._history_long(), self._build_changed()),
                timeout=command.timeout,
            )
        except TimeoutError:
            self._session.idle_timed_out()

    def _build_changed(self) -> bool:
        """The workers' owner made another build current since this run started."""
        return self._moves and workflow.info().is_target_worker_deployment_version_changed()

    def _history_long(self) -> bool:
        """The run's history is long enough to hand over (the server's suggestion, or the
        spec's event limit)."""
        info = workflow.info()
        limit = self._session.spec.session.continue_as_new_after_events
        over_limit = limit is not None and info.get_current_history_length() >= limit
        return over_limit or info.is_continue_as_new_suggested()
