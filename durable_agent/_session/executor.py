"""Carrying out the Session's commands: the one loop that asks ``next_command``, has
the command done, and tells the Session what came of it.

How each command is done is the caller's ``Effects``: the session workflow does them
with Temporal's primitives (activities, durable timers, conditions), an agent run inside
someone's own workflow does the same in that workflow, and a test does them in its own
process. Which event each result becomes is decided here, once for all of them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, assert_never

from durable_agent._contracts.approvals import TokenVerdict
from durable_agent._contracts.boundary import AgentResult, GuardrailVerdict
from durable_agent._wire.messages import ToolMessage

from .protocol import (
    ApprovalsChecked,
    ApprovalsWaited,
    AwaitApprovals,
    CallModel,
    CallsDescribed,
    CheckApprovals,
    CheckGuardrails,
    Command,
    ContinueAsNew,
    DescribeCalls,
    EscalationSent,
    Finish,
    GuardrailsChecked,
    IdleTimedOut,
    ModelAnswered,
    ModelOutcome,
    NotifyEscalation,
    Pause,
    RunTools,
    Summarise,
    SummaryAnswered,
    TokensChecked,
    ToolsFinished,
    VerifyTokens,
    WaitForMessage,
)
from .state_machine import Session


class Effects(Protocol):
    """What doing the Session's commands takes. Each method does one command and
    returns what came of it; the executor tells the Session."""

    def now(self) -> datetime:
        """The time the Session is told (a workflow's ``workflow.now()``)."""

    def continue_suggested(self) -> bool:
        """The run's history is long enough to hand over to a fresh run."""

    def build_changed(self) -> bool:
        """The workers' owner made another build current since this run started."""

    async def before(self, command: Command) -> None:
        """Before each command is done (announcements catch up, say)."""

    async def finish(self, result: AgentResult) -> AgentResult:
        """The session ends with ``result``; what the caller gets."""

    async def continue_as_new(self, command: ContinueAsNew) -> None:
        """Hand the state to a fresh run (returns only when it cannot be carried yet)."""

    async def call_model(self, command: CallModel) -> ModelOutcome:
        """The reply with what its worker found (``ModelReply``), a failure, or a
        cancellation: the Session takes it in one event."""

    def model_done(self, command: CallModel, outcome: ModelOutcome, sent: int) -> None:
        """After the Session took the outcome of a call that was sent ``sent`` messages."""

    async def summarise(self, command: Summarise) -> ModelOutcome: ...

    def summary_done(self, command: Summarise, outcome: ModelOutcome, sent: int) -> None:
        """After the Session took the outcome of a summary of ``sent`` messages."""

    async def check_guardrails(
        self, command: CheckGuardrails
    ) -> tuple[GuardrailVerdict | None, str | None]:
        """The verdict, or ``None`` and why the guardrails could not give one."""

    async def pause(self, command: Pause) -> None: ...

    async def check_approvals(self, command: CheckApprovals) -> list[bool]: ...

    async def describe_calls(self, command: DescribeCalls) -> list[str]: ...

    async def verify_tokens(self, command: VerifyTokens) -> list[TokenVerdict]: ...

    async def notify_escalation(self, command: NotifyEscalation) -> None: ...

    async def await_approvals(self, command: AwaitApprovals) -> None:
        """Until the Session says the wait is over (``SessionView.approvals_wait_over``);
        a deadline that passes meanwhile is told to it (``DeadlinesPassed``)."""

    async def approvals_taken(self, command: AwaitApprovals) -> None:
        """After the Session took the decisions into the batch."""

    async def run_tools(self, command: RunTools) -> dict[int, ToolMessage]:
        """The calls' results by slot (those not told as they arrived, ``ToolArrived``)."""

    async def wait_for_message(self, command: WaitForMessage) -> bool:
        """Until the Session says so (``SessionView.idle_wait_over``: ``True``) or the
        command's timeout passes (``False``)."""


async def carry_out(session: Session, effects: Effects) -> AgentResult:
    """Do the Session's commands until it finishes; its result."""
    while True:
        result = await carry_out_step(session, effects)
        if result is not None:
            return result


async def carry_out_step(session: Session, effects: Effects) -> AgentResult | None:
    """Ask the Session for its next command, have it done, and tell the Session what
    came of it: one turn of the loop (``carry_out`` is these until the end). The
    session's result once it finishes, else ``None``."""
    command = session.next_command(
        suggested=effects.continue_suggested(),
        now=effects.now(),
        changed=effects.build_changed(),
    )
    await effects.before(command)
    match command:
        case Finish():
            return await effects.finish(command.result)
        case ContinueAsNew():
            await effects.continue_as_new(command)
        case CallModel():
            sent = len(session.messages)
            outcome = await effects.call_model(command)
            session.handle(ModelAnswered(outcome), effects.now())
            effects.model_done(command, outcome, sent)
        case Summarise():
            sent = len(session.messages)
            outcome = await effects.summarise(command)
            session.handle(SummaryAnswered(outcome), effects.now())
            effects.summary_done(command, outcome, sent)
        case CheckGuardrails():
            verdict, failure = await effects.check_guardrails(command)
            session.handle(GuardrailsChecked(verdict, failure), effects.now())
        case Pause():
            await effects.pause(command)
        case CheckApprovals():
            verdicts = await effects.check_approvals(command)
            session.handle(ApprovalsChecked(verdicts), effects.now())
        case DescribeCalls():
            descriptions = await effects.describe_calls(command)
            session.handle(CallsDescribed(descriptions), effects.now())
        case VerifyTokens():
            tokens = await effects.verify_tokens(command)
            session.handle(TokensChecked(tokens), effects.now())
        case NotifyEscalation():
            await effects.notify_escalation(command)
            session.handle(EscalationSent(), effects.now())
        case AwaitApprovals():
            await effects.await_approvals(command)
            session.handle(ApprovalsWaited(), effects.now())
            await effects.approvals_taken(command)
        case RunTools():
            results = await effects.run_tools(command)
            session.handle(ToolsFinished(results), effects.now())
        case WaitForMessage():
            if not await effects.wait_for_message(command):
                session.handle(IdleTimedOut(), effects.now())
        case _:  # mypy proves every command has its case
            assert_never(command)
    return None
