"""AgentWorkflow: one session, one conversation, carried out on Temporal.

Every rule lives in the pure ``Session`` (workflows/session.py): it says what to do
next and takes the outcome back. This class only carries its commands out (activities,
durable waits, continue-as-new), records signals into it and answers queries from it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent.contracts import (
        WORKFLOW_NAME,
        AgentResult,
        ApprovalSignal,
        EndSessionSignal,
        PendingApproval,
        SessionStatus,
    )
    from durable_agent.messages import ApprovalDecision, AssistantMessage, Message, UserMessage
    from durable_agent.spec import AgentInput, AgentSpec, ModelSpec
    from workflows.approval_wait import wait_for_decisions
    from workflows.commands import (
        AwaitApprovals,
        CallModel,
        CheckApprovals,
        ContinueAsNew,
        Finish,
        Pause,
        RunTools,
        WaitForMessage,
    )
    from workflows.continuation import hand_over
    from workflows.inputs import InvalidInput, decode, decode_start
    from workflows.model_calls import ModelCaller
    from workflows.session import Session
    from workflows.state import ContinuedInput, SessionState
    from workflows.tool_calls import check_approvals, resolve_tools, run_tool_groups
    from workflows.transcript_sync import PayloadTooLarge, TranscriptSync
    from workflows.turn_logic import session_title

#: Patch id of the session-title memo (workflow.patched; never reuse or rename).
SESSION_TITLE_PATCH = "session-title-memo"
#: The default of a signal argument a sender may leave out.
NO_PAYLOAD = RawValue(Payload())
#: Stands in for the spec of a session whose input could not be read (it fails at once).
PLACEHOLDER_SPEC = AgentSpec(model=ModelSpec(name="invalid-input"))


def _now_ms() -> int:
    return int(workflow.now().timestamp() * 1000)


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    @workflow.init
    def __init__(self, raw: RawValue) -> None:
        self._invalid_input: str | None = None
        try:
            request: AgentInput | ContinuedInput = decode_start(raw)
        except InvalidInput as error:  # run() fails the session with this text
            self._invalid_input = str(error)
            request = AgentInput.model_construct(spec=PLACEHOLDER_SPEC)
        self._request = request
        state = request.carried if isinstance(request, ContinuedInput) else SessionState()
        self._session = session = Session(request.spec, state)
        rules = request.spec.session
        self._sync = TranscriptSync(
            session.messages,
            state.stored_count,
            rules.payload_budget_bytes,
            timedelta(seconds=rules.heartbeat_timeout_seconds),
        )
        # a fresh session's first call seeds the workers' cache with the model setup
        self._model = ModelCaller(session, self._sync, send_setup=isinstance(request, AgentInput))

    @workflow.run
    async def run(self, raw: RawValue) -> AgentResult:
        if self._invalid_input is not None:
            raise ApplicationError(
                f"invalid session input: {self._invalid_input}",
                type="InvalidInput",
                non_retryable=True,
            )
        request, session = self._request, self._session
        if isinstance(request, AgentInput):
            await self._resolve_tools()
            session.start(request, _now_ms())
            # Added after sessions were recorded: a command that older histories lack,
            # so it is patched in (see "Changing workflow code" in the README).
            if workflow.patched(SESSION_TITLE_PATCH):
                workflow.upsert_memo({"title": session_title(session.messages)})
        elif request.carried.transcript is not None:
            await self._sync.load(request.carried.transcript)
        try:
            return await self._carry_out_commands()
        except PayloadTooLarge as error:
            return session.fail(str(error))

    async def _resolve_tools(self) -> None:
        rules, names = self._session.spec.session, [t.name for t in self._session.spec.tools]
        if names:
            problem = self._session.tools_resolved(await resolve_tools(names, rules))
            if problem:
                raise ApplicationError(problem, type="UnknownTool", non_retryable=True)

    async def _carry_out_commands(self) -> AgentResult:
        session = self._session
        while True:
            command = session.next_command(suggested=self._history_long(), now=workflow.now())
            if isinstance(command, Finish):
                return command.result
            if isinstance(command, ContinueAsNew):
                await hand_over(session, self._sync)
            elif isinstance(command, CallModel):
                outcome = await self._model.call(command.turn)
                if isinstance(outcome, AssistantMessage):
                    session.model_replied(outcome)
                    self._model.replied()
                else:
                    session.model_failed(outcome.kind, outcome.text, outcome.retry_after, _now_ms())
            elif isinstance(command, Pause):
                await workflow.sleep(command.delay)
            elif isinstance(command, CheckApprovals):
                verdicts = await check_approvals(command.calls, session.spec.session)
                session.approvals_checked(verdicts)
            elif isinstance(command, AwaitApprovals):
                await wait_for_decisions(
                    session.approvals,
                    command.ids,
                    session.timeout_decision,
                    lambda: session.interrupted(self._history_long()),
                )
                session.approvals_waited(workflow.now())
            elif isinstance(command, RunTools):
                results, as_returned = await run_tool_groups(command, session.spec.session)
                first = len(session.messages)  # results land in slot order from here
                self._sync.stored_by_tool({first + k for k in as_returned})
                session.tools_finished(results)
            elif isinstance(command, WaitForMessage):
                await self._wait_for_message(command)

    async def _wait_for_message(self, command: WaitForMessage) -> None:
        state = self._session.state
        try:
            await workflow.wait_condition(
                lambda: bool(state.inbox) or self._session.interrupted(self._history_long()),
                timeout=command.timeout,
            )
        except TimeoutError:
            self._session.idle_timed_out()

    def _history_long(self) -> bool:
        """The run's history is long enough to hand over (the server's suggestion, or the
        spec's event limit)."""
        info = workflow.info()
        limit = self._session.spec.session.continue_as_new_after_events
        over_limit = limit is not None and info.get_current_history_length() >= limit
        return over_limit or info.is_continue_as_new_suggested()

    # --- signals: record only ------------------------------------------------------------

    @workflow.signal
    def approve(self, raw: RawValue) -> None:
        self._record_decision(raw, "approved")

    @workflow.signal
    def deny(self, raw: RawValue) -> None:
        self._record_decision(raw, "denied")

    def _record_decision(self, raw: RawValue, decision: ApprovalDecision) -> None:
        try:
            signal: ApprovalSignal = decode(raw, ApprovalSignal)
        except InvalidInput as error:
            self._rejected(self._session.reject(f"{decision}: unreadable signal ({error})"))
            return
        self._rejected(self._session.decision_arrived(signal, decision, workflow.now()))

    @workflow.signal
    def send_message(self, raw: RawValue) -> None:
        try:
            message: str | UserMessage = decode(raw, str | UserMessage)
        except InvalidInput as error:
            self._rejected(self._session.reject(f"send_message: unreadable message ({error})"))
            return
        if isinstance(message, str):
            message = UserMessage(content=message)
        self._rejected(self._session.message_arrived(message, _now_ms()))

    @workflow.signal
    def end_session(self, raw: RawValue = NO_PAYLOAD) -> None:
        request = EndSessionSignal()
        if raw is not NO_PAYLOAD:
            try:
                request = decode(raw, EndSessionSignal | None) or request
            except InvalidInput as error:
                text = f"end_session: unreadable signal ({error}); ending anyway"
                self._rejected(self._session.reject(text))
        self._session.end_requested(request)

    def _rejected(self, text: str | None) -> None:
        if text is not None:
            workflow.logger.warning("signal changed nothing: %s", text)

    # --- queries -----------------------------------------------------------------------------

    @workflow.query
    def messages(self, from_index: int = 0) -> list[Message]:
        return self._session.messages[max(from_index, 0) :]

    @workflow.query
    def pending_approvals(self) -> list[PendingApproval]:
        return self._session.approvals.undecided()

    @workflow.query
    def status(self) -> SessionStatus:
        return self._session.status()
