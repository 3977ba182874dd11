"""How the session workflow does the Session's commands: with Temporal's primitives.

Each method does one command (an activity, a durable timer, a condition, a
continue-as-new) and returns what came of it; ``carry_out`` tells the Session. Besides
doing, the workflow keeps readers told (the live feed), the workers' store of the
array up to date, and the session's title.
"""

from __future__ import annotations

import contextlib
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.approvals import TokenVerdict
    from durable_agent._contracts.boundary import AgentResult, GuardrailVerdict
    from durable_agent._session import (
        AwaitApprovals,
        CallModel,
        CheckApprovals,
        CheckGuardrails,
        Command,
        ContinueAsNew,
        DescribeCalls,
        ModelCancelled,
        ModelFailure,
        ModelOutcome,
        ModelReply,
        NotifyEscalation,
        Pause,
        RunTools,
        Session,
        Summarise,
        VerifyTokens,
        WaitForMessage,
    )
    from durable_agent._wire.messages import ToolMessage, session_title

    from .approvals import (
        check_approvals,
        describe_calls,
        notify_escalation,
        report_to_parent,
        verify_tokens,
        wait_for_decisions,
    )
    from .continuation import hand_over
    from .live_feed import LiveFeed
    from .model_calls import ModelCaller
    from .tool_calls import check_guardrails, run_tool_groups
    from .transcript_sync import TranscriptSync


class SessionEffects:
    """The ``Effects`` of the session workflow (``durable_agent._session.Effects``)."""

    def __init__(
        self,
        session: Session,
        feed: LiveFeed,
        sync: TranscriptSync,
        model: ModelCaller,
        *,
        untitled: bool,
    ) -> None:
        self._session, self._feed, self._sync, self._model = session, feed, sync, model
        self._untitled = untitled
        """Started without a message: the first one that arrives titles the session."""

    def now(self) -> datetime:
        return workflow.now()

    def continue_suggested(self) -> bool:
        """The server suggests a fresh run, or the spec's event limit is reached."""
        info = workflow.info()
        limit = self._session.spec.session.continue_as_new_after_events
        over_limit = limit is not None and info.get_current_history_length() >= limit
        return over_limit or info.is_continue_as_new_suggested()

    def build_changed(self) -> bool:
        return workflow.info().is_target_worker_deployment_version_changed()

    async def before(self, command: Command) -> None:
        await self._feed.caught_up()
        if self._untitled and (title := session_title(self._session.messages)):
            self._untitled = False
            workflow.upsert_memo({"title": title})

    async def finish(self, result: AgentResult) -> AgentResult:
        await self._sync.store_for_log()
        return result

    async def continue_as_new(self, command: ContinueAsNew) -> None:
        await hand_over(self._session, self._sync, self._feed, upgrade=command.upgrade)

    async def call_model(self, command: CallModel) -> ModelOutcome:
        self._feed.model_call(command.turn)
        return await self._model.call(command.turn)

    def model_done(self, command: CallModel, outcome: ModelOutcome, sent: int) -> None:
        if isinstance(outcome, ModelReply):
            self._model.replied(sent, outcome.message)
            self._feed.model_replied(command.turn, outcome.message)
        else:
            self._failed(command.turn, outcome)

    async def summarise(self, command: Summarise) -> ModelOutcome:
        return await self._model.summarise(command.turn, command.until)

    def summary_done(self, command: Summarise, outcome: ModelOutcome, sent: int) -> None:
        if isinstance(outcome, ModelReply):
            self._model.replied(sent)  # the worker stored what the summary was made of
        else:
            self._failed(command.turn, outcome)

    def _failed(self, turn: int, outcome: ModelOutcome) -> None:
        if isinstance(outcome, ModelCancelled):
            self._feed.model_failed(turn, "cancelled", "the turn was cancelled")
        elif isinstance(outcome, ModelFailure):
            self._feed.model_failed(turn, outcome.kind, outcome.text)

    async def check_guardrails(
        self, command: CheckGuardrails
    ) -> tuple[GuardrailVerdict | None, str | None]:
        return await check_guardrails(command, self._session.spec)

    async def pause(self, command: Pause) -> None:
        """A durable wait between attempts that a cancelled turn cuts short."""
        session = self._session
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: session.view.loop.cancelling, timeout=command.delay
            )

    async def check_approvals(self, command: CheckApprovals) -> list[bool]:
        return await check_approvals(command, self._session.spec.session)

    async def describe_calls(self, command: DescribeCalls) -> list[str]:
        return await describe_calls(command, self._session.spec.session)

    async def verify_tokens(self, command: VerifyTokens) -> list[TokenVerdict]:
        return await verify_tokens(command, self._session.spec.session)

    async def notify_escalation(self, command: NotifyEscalation) -> None:
        await notify_escalation(command, self._session.spec.session)

    async def await_approvals(self, command: AwaitApprovals) -> None:
        session = self._session
        await report_to_parent(session)  # a sub-agent's people decide in its parent
        await wait_for_decisions(session, command.ids, self.continue_suggested)
        await self._feed.caught_up()  # decisions (deadlines' defaults) told before they apply

    async def approvals_taken(self, command: AwaitApprovals) -> None:
        await report_to_parent(self._session)

    async def run_tools(self, command: RunTools) -> dict[int, ToolMessage]:
        first = len(self._session.messages)
        await run_tool_groups(command, self._session, self._feed, self._sync.stored_by_tool(first))
        return {}  # each was placed as it arrived

    async def wait_for_message(self, command: WaitForMessage) -> bool:
        await self._sync.store_for_log()
        view = self._session.view
        try:
            await workflow.wait_condition(
                lambda: view.idle_wait_over(self.continue_suggested(), self.build_changed()),
                timeout=command.timeout,
            )
        except TimeoutError:
            return False
        return True
