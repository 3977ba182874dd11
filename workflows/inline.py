"""An agent run inside the caller's own workflow: the same Session, carried out there.

Nothing of the session workflow is started: the Session's model calls, tool calls and
approval checks are activities of the calling workflow, and its array lives in that
workflow's memory for as long as the run lasts. The rules are the Session's, so a run
here admits the spec against the worker's registries, gates calls, retries and rescues
exactly as a session does. What a session workflow adds around the loop stays with it:
the live event feed, queries, continue-as-new. A run is one reply (it ends with the
answer); its messages come back with the result, for the caller to carry on.

People decide the run's gated calls through the caller: ``InlineRun.decide`` from one of
its update handlers, or an ``Approver`` callback the run asks for each call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.approvals import (
        NO_WAITING_CALL,
        DecisionRequest,
        DecisionResult,
        PendingApproval,
        TokenVerdict,
    )
    from durable_agent._contracts.boundary import AgentResult, GuardrailVerdict
    from durable_agent._errors import DurableAgentError, Failure, PayloadTooLarge
    from durable_agent._session import (
        RECORDED_DECISIONS,
        AwaitApprovals,
        CallModel,
        CheckApprovals,
        CheckGuardrails,
        Command,
        Compatibility,
        ContinueAsNew,
        DescribeCalls,
        ModelOutcome,
        ModelReply,
        NotifyEscalation,
        Pause,
        RunTools,
        Session,
        Summarise,
        VerifyTokens,
        WaitForMessage,
        carry_out,
    )
    from durable_agent._session.protocol import Admitted, DecisionArrived, DecisionOutcomeTold
    from durable_agent._spec.document import AgentInput, AgentSpec
    from durable_agent._wire.messages import Message, ToolMessage, UserMessage

    from .approvals import (
        check_approvals,
        describe_calls,
        notify_escalation,
        verify_tokens,
        wait_for_decisions,
    )
    from .checks import admit
    from .model_calls import ModelCaller
    from .patches import PREVIOUS_BASELINE, retired
    from .starting import new_session_state, resolve_tools_of
    from .tool_calls import check_guardrails, run_scope, run_tool_groups
    from .transcript_sync import TranscriptSync

#: Asked for each call of the run that waits for a person; returns the decision (its
#: ``approval_id`` is the call's). Runs as workflow code: it may wait for a signal or an
#: update of the caller's workflow, or decide by a rule of the caller's.
Approver = Callable[[PendingApproval], Awaitable[DecisionRequest]]


class InlineRunError(DurableAgentError, ApplicationError):
    """An inline run cannot go on: the message says what to do instead. It fails the
    calling workflow (or, raised in an update handler, that update only)."""

    def __init__(self, message: str) -> None:
        ApplicationError.__init__(self, message, type="InlineRunError", non_retryable=True)


class InlineRun:
    """One agent run in the calling workflow. Make it in the workflow (its ``__init__``
    or ``run``), ``await run(...)`` it once; meanwhile the workflow's handlers may read
    ``pending()`` and pass people's decisions to ``decide``."""

    def __init__(self, spec: AgentSpec, *, approver: Approver | None = None) -> None:
        rules = spec.session.model_copy(update={"end_after_reply": True})
        self.spec = spec.model_copy(update={"session": rules})
        self._approver = approver
        self._session: Session | None = None
        self._updates = 0
        self._asking: dict[str, asyncio.Task[None]] = {}
        self.failure: str | None = None
        """Why the run failed, once it has."""
        self.approver_failed: str | None = None
        """Why the approver's decision was refused, if it was: the run fails with it
        (the call would otherwise wait for a decision that never comes)."""

    def pending(self) -> list[PendingApproval]:
        """The run's calls waiting for a person (none before the run starts); once the
        run has failed, ``InlineRunError`` saying why (a caller polling for calls to
        decide learns that none will come)."""
        if self.failure is not None:
            raise InlineRunError(f"the agent run failed: {self.failure}")
        return [] if self._session is None else self._session.view.approvals.pending()

    @property
    def messages(self) -> list[Message]:
        """The run's conversation after its instructions (a next run's ``history``)."""
        if self._session is None:
            return []
        messages = list(self._session.messages)
        return messages[1:] if messages and messages[0].role == "system" else messages

    async def decide(self, request: DecisionRequest) -> DecisionResult:
        """Take a person's decision on one waiting call, as the session's ``decide``
        update does (the same checks of who may decide and of signed tokens); returns
        once the run took it, or raises ``ApplicationError`` saying why it changed
        nothing (an update handler that calls this fails that update only)."""
        session = self._session
        if session is None:
            raise InlineRunError("nothing to decide yet: the run has not started")
        decision = RECORDED_DECISIONS[request.decision]
        signal = request.as_signal()
        problem = session.view.refusal(DecisionArrived(signal, decision))
        if problem is not None:
            if NO_WAITING_CALL in problem:  # say which do wait
                waiting = [p.approval_id for p in session.view.approvals.undecided()]
                problem += f" (waiting: {', '.join(waiting) or 'none'})"
            raise ApplicationError(problem, type=Failure.DECISION_REFUSED, non_retryable=True)
        update = workflow.current_update_info()
        self._updates += 1
        key = update.id if update is not None else f"inline-decision-{self._updates}"
        session.handle(DecisionArrived(signal, decision, key), workflow.now())
        view = session.view
        await workflow.wait_condition(lambda: view.approvals.decision_outcome(key) is not None)
        outcome = view.approvals.decision_outcome(key)
        session.handle(DecisionOutcomeTold(key), workflow.now())
        if outcome is None or isinstance(outcome, str):
            why = outcome or "the decision was not taken"
            raise ApplicationError(why, type=Failure.DECISION_REFUSED, non_retryable=True)
        return outcome

    async def run(
        self, message: str | UserMessage, *, history: Sequence[Message] = ()
    ) -> AgentResult:
        """Run the agent to its answer: admitted by the worker, its tools resolved, the
        conversation opened with ``history`` (the messages of an earlier run, say) and
        ``message``; how it ended (``AgentResult``; the messages are in ``messages``)."""
        if self._session is not None:
            raise InlineRunError("an InlineRun runs once: make another for the next run")
        try:
            result = await self._run(message, history)
        except BaseException as error:  # refused at admission, say: no call will wait
            self.failure = str(error) or type(error).__name__
            raise
        if result.status == "failed":
            self.failure = result.error or result.stop_reason
        return result

    async def _run(self, message: str | UserMessage, history: Sequence[Message]) -> AgentResult:
        # the previous release's inline runs recorded one marker here
        retired(PREVIOUS_BASELINE)
        scope = f"run-{workflow.uuid4().hex[:12]}"  # this run's calls apart from others'
        with run_scope(scope):
            state = new_session_state()
            # a decision signed for one run's call is worth nothing in another run of
            # the same workflow: both bindings name this run
            info = workflow.info()
            session = Session(
                self.spec,
                state,
                Compatibility(),
                run_chain=f"{info.first_execution_run_id}/{scope}",
                run=f"{info.run_id}/{scope}",
            )
            self._session = session
            admission = await admit(self.spec, carried=False)
            session.handle(Admitted(admission.prices), workflow.now())
            rules = self.spec.session
            sync = TranscriptSync(
                session.messages,
                state.stored_count,
                rules.payload_budget_bytes,
                timedelta(seconds=rules.heartbeat_timeout_seconds),
            )
            sync.payload_store_bytes = admission.payload_store_bytes
            await resolve_tools_of(session)
            request = AgentInput(spec=self.spec, message=message, history=list(history))
            session.start(request, workflow.now())
            model = ModelCaller(session, sync, send_setup=True)
            effects = _InlineEffects(session, sync, model, self)
            try:
                return await carry_out(session, effects)
            except PayloadTooLarge as error:
                return session.fail(str(error))
            finally:
                for task in self._asking.values():
                    task.cancel()

    def ask_approver(self, pending: PendingApproval) -> None:
        """Have the approver decide ``pending`` (once), in a task of its own."""
        if self._approver is None or pending.approval_id in self._asking:
            return
        approver = self._approver

        async def ask() -> None:
            try:
                await self.decide(await approver(pending))
            except ApplicationError as error:  # the decision changed nothing: say why
                self.approver_failed = (
                    f"the approver's decision on {pending.tool_name} ({pending.approval_id}) "
                    f"was refused: {error.message}"
                )

        self._asking[pending.approval_id] = asyncio.ensure_future(ask())


class _InlineEffects:
    """The ``Effects`` of an inline run: the session workflow's, less its feed, its
    handover and its idle wait (a run ends with its answer)."""

    def __init__(
        self, session: Session, sync: TranscriptSync, model: ModelCaller, run: InlineRun
    ) -> None:
        self._session, self._sync, self._model, self._run = session, sync, model, run

    def now(self) -> datetime:
        return workflow.now()

    def continue_suggested(self) -> bool:
        return False  # the caller's workflow decides when it continues as new

    def build_changed(self) -> bool:
        return False  # the run is part of the caller's workflow, on the caller's build

    async def before(self, command: Command) -> None:
        return None

    async def finish(self, result: AgentResult) -> AgentResult:
        return result

    async def continue_as_new(self, command: ContinueAsNew) -> None:
        raise InlineRunError(
            "an inline run cannot continue as new: continue the calling workflow instead, "
            "passing the run's messages to the next run as its history"
        )

    async def call_model(self, command: CallModel) -> ModelOutcome:
        return await self._model.call(command.turn)

    def model_done(self, command: CallModel, outcome: ModelOutcome, sent: int) -> None:
        if isinstance(outcome, ModelReply):
            self._model.replied(sent, outcome.message)

    async def summarise(self, command: Summarise) -> ModelOutcome:
        return await self._model.summarise(command.turn, command.until)

    def summary_done(self, command: Summarise, outcome: ModelOutcome, sent: int) -> None:
        if isinstance(outcome, ModelReply):
            self._model.replied(sent)

    async def check_guardrails(
        self, command: CheckGuardrails
    ) -> tuple[GuardrailVerdict | None, str | None]:
        return await check_guardrails(command, self._session.spec)

    async def pause(self, command: Pause) -> None:
        await workflow.sleep(command.delay)

    async def check_approvals(self, command: CheckApprovals) -> list[bool]:
        return await check_approvals(command, self._session.spec.session)

    async def describe_calls(self, command: DescribeCalls) -> list[str]:
        return await describe_calls(command, self._session.spec.session)

    async def verify_tokens(self, command: VerifyTokens) -> list[TokenVerdict]:
        return await verify_tokens(command, self._session.spec.session)

    async def notify_escalation(self, command: NotifyEscalation) -> None:
        await notify_escalation(command, self._session.spec.session)

    async def await_approvals(self, command: AwaitApprovals) -> None:
        session, run = self._session, self._run
        waiting = set(command.ids)
        for pending in session.view.approvals.pending():
            if pending.approval_id in waiting:
                run.ask_approver(pending)

        def approver_failed() -> bool:
            return run.approver_failed is not None

        await wait_for_decisions(session, command.ids, lambda: False, approver_failed)
        if run.approver_failed is not None:
            raise InlineRunError(run.approver_failed)

    async def approvals_taken(self, command: AwaitApprovals) -> None:
        return None

    async def run_tools(self, command: RunTools) -> dict[int, ToolMessage]:
        first = len(self._session.messages)
        await run_tool_groups(command, self._session, None, self._sync.stored_by_tool(first))
        return {}

    async def wait_for_message(self, command: WaitForMessage) -> bool:
        return False  # a run ends with its answer: nothing else will come
