"""The session as a pure state machine: every rule of the turn loop, without Temporal.

A ``Session`` owns one ``SessionState`` (the very object continue-as-new carries) and
the message array inside it. It is used three ways: ``handle`` takes an event (a message
arrived, the model answered, tools finished, a person decided: ``protocol``),
``next_command`` says what to do next (call the model, pause, check or await approvals,
run tool groups, wait for a message, continue as new, or finish), and ``view`` is what
may be read (its status, its pending approvals, when a wait is over). The executor
(``carry_out``) carries commands out through an ``Effects`` of the caller's: the
workflow's Temporal primitives, or, in a test, functions in the same process.

The work of deciding is shared with parts that each keep one part of the rules: the
tool batch (slots, the gate, run groups, results), people's decisions, approvals as
data, budgets, rescue of unusable replies, the swarm, what people send. Each part owns
its slice of the state (``SessionState.approvals``, ``.budget``, ...) and reads the
others' only through their methods; the Session keeps the loop's own fields. The parts
are the Session's own: nothing outside it reaches them.

No I/O, no clock (times are given), no randomness: deterministic by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, assert_never

from durable_agent._contracts.boundary import AgentResult
from durable_agent._spec.document import AgentInput, AgentSpec, parse_structured_output
from durable_agent._wire.messages import AssistantMessage, ToolMessage, UserMessage, text_of
from durable_agent._wire.outgoing import prepare_request_messages
from durable_agent._wire.transcript import Transcript, root_of

from .batch import ToolBatch
from .decisions import Approvals, Decisions, StandingGrants
from .gate import Gate, cancel_text, guardrail_text, not_completed
from .model_step import Budget, ModelStep, Rescue, truncated_reason, unusable_reason
from .protocol import (
    Admitted,
    ApprovalsChecked,
    ApprovalsWaited,
    AwaitApprovals,
    BudgetChanged,
    CallsDescribed,
    CancelRequested,
    CapacityKept,
    CheckGuardrails,
    ChildApprovalsReported,
    ChildStarted,
    Command,
    ContinueAsNew,
    ContinueAsNewDeferred,
    DeadlinesPassed,
    DecisionArrived,
    DecisionOutcomeTold,
    DecisionsTold,
    DescribeCalls,
    EndRequested,
    EscalationSent,
    Event,
    Finish,
    FlushRequested,
    ForwardsTaken,
    GuardrailsChecked,
    IdleTimedOut,
    Injected,
    MessageArrived,
    ModelAnswered,
    ModelCallSent,
    ModelFailure,
    ModelOutcome,
    ModelReply,
    MoveRequested,
    MoveToCurrentAsked,
    NotifyEscalation,
    Pause,
    Refused,
    RevokeRequested,
    RunTools,
    SubAgentsAdded,
    Summarise,
    SummaryAnswered,
    TokensChecked,
    ToolArrived,
    ToolsAdded,
    ToolsFinished,
    ToolsResolved,
    VerifyTokens,
    WaitForMessage,
    WaitingForCapacity,
    WakeUpCancelled,
    WakeUpSet,
)
from .requests import Requests
from .state import SessionState, epoch_ms, last_reply, open_conversation, stage_after
from .toolbox import Swarm, Toolbox
from .view import Parts, SessionView, TurnMarks
from .wake_ups import WakeUps

Reply = AssistantMessage | ToolMessage


@dataclass(frozen=True)
class Compatibility:
    """Where this run meets a path the previous release asked on its own (its runs
    recorded a marker there): the workflow consumes that marker, so that their
    histories replay (``workflows/patches.py``, ``retired``). By default nothing is
    asked: what a session in a test, or inline, follows."""

    approvals_in_pages: Callable[[], object] = lambda: None
    """A batch of thousands judged, asked and announced one page per workflow task."""


class Session:
    def __init__(
        self,
        spec: AgentSpec,
        state: SessionState,
        compat: Compatibility | None = None,
        *,
        run_chain: str = "",
        run: str = "",
    ) -> None:
        """``run_chain``: the session's first run id, which signed revocations of grants
        are bound to (the same across continue-as-new, new for a new session under the
        same id); ``run``: the workflow run asking for approvals now, which each waiting
        call names (``PendingApproval.run``) and a signed decision on it must name too.
        An agent run inline in a user's workflow adds its own name to both."""
        compat = compat or Compatibility()
        self.spec = spec
        self._state = state
        self.messages = Transcript.adopt(
            state.messages, root_of(state.chain), ids=state.message_ids
        )
        """The array (read it; only the Session writes it)."""
        # each part is made with its own slice, after the parts it asks
        approvals = Approvals(state.approvals, spec.approvals.escalation, compat.approvals_in_pages)
        swarm = Swarm(spec, spec.swarm, state.swarm) if spec.swarm is not None else None
        toolbox = Toolbox(spec, state.tools, swarm)
        gate = Gate(spec.approvals, state.gate)
        budget = Budget(spec, state.budget)
        requests = Requests(spec, state.requests, swarm, budget, gate)
        sweeps = StandingGrants(state.sweeps, approvals, gate, toolbox)
        decisions = Decisions(
            spec, state.decisions, approvals, gate, sweeps, toolbox, requests, run_chain, run
        )
        self._approvals, self._swarm, self._toolbox, self._gate = approvals, swarm, toolbox, gate
        self._budget, self._requests, self._decisions = budget, requests, decisions
        self._batch = ToolBatch(spec, gate, approvals, sweeps, decisions, requests, toolbox, swarm)
        self._wake_ups = self._batch.wake_ups = WakeUps(state.wake_ups, state.tools)
        self._rescue = Rescue(spec, state.rescue, self.messages)
        self._step = ModelStep(self.messages)
        self._marks = TurnMarks()
        batch, step, wake_ups = self._batch, self._step, self._wake_ups
        parts = Parts(
            approvals, swarm, toolbox, gate, budget, requests, decisions, batch, step, wake_ups
        )
        self.view = SessionView(spec, state, self.messages, parts, self._marks)
        """What may be read: status, approvals, when a wait is over."""
        self._reply: Reply | None = None
        self._structured: Any = None
        self._outcome: Finish | None = None
        self._checking: UserMessage | None = None
        """A user message its input guardrails are checking (not in the array yet)."""
        self._held: AssistantMessage | None = None
        """A final answer its output guardrails are checking (not in the array yet)."""
        self._checked_reply: AssistantMessage | None = None
        """A reply whose calls' arguments its worker found to be JSON objects."""

    # --- opening and closing a run ------------------------------------------------------

    def start(self, request: AgentInput, now: datetime) -> None:
        """The conversation of a fresh session: instructions, given history, first message."""
        swarm = self._swarm
        first = (None, None) if swarm is None else (swarm.active, swarm.agent.instructions)
        checked_first = open_conversation(self.spec, self.messages, request, first, now)
        if checked_first is not None:
            self._requests.queue(checked_first)
        self._state.stage = stage_after(self.messages)

    def for_next_run(self) -> SessionState:
        """The state a fresh run continues from (the array inline; the workflow swaps it
        for a reference when it does not fit one payload)."""
        return self._state.model_copy(update={"runs": self._state.runs + 1, "transcript": None})

    def fail(self, text: str) -> AgentResult:
        """End the session as failed (a problem outside the loop's rules, such as a
        message too large for any payload)."""
        return self._finish("failed", "error", error=text).result

    # --- events ---------------------------------------------------------------------------

    def handle(self, event: Event, now: datetime) -> str | None:
        """Take one event. What it returns: why the event was refused or the session
        cannot start (``None``: taken), for the events that can be refused."""
        match event:
            case MessageArrived():
                return self._requests.message_arrived(event.message, now)
            case Injected():
                return self._requests.inject_arrived(event.message, now)
            case EndRequested():
                self._requests.end_requested(event.request)
            case FlushRequested():
                self._requests.flush_requested(event.request)
            case BudgetChanged():
                return self._requests.budget_changed(event.request)
            case MoveRequested():
                return self._requests.move_requested(event.request)
            case CancelRequested():
                return self._cancel_requested(event)
            case MoveToCurrentAsked():
                self._state.move_to_current = event.asked
            case DecisionArrived():
                return self._decisions.decision_arrived(
                    event.signal, event.decision, now, key=event.key
                )
            case RevokeRequested():
                return self._decisions.revoke_requested(event.signal, event.key)
            case DecisionOutcomeTold():
                self._decisions.outcomes.pop(event.key, None)
            case ForwardsTaken():
                self._decisions.forwards_taken(event.child_id)
            case DecisionsTold():
                self._approvals.newly_decided[:] = event.waiting
            case ChildApprovalsReported():
                self._decisions.child_approvals(event.report, self._batch.running_children())
            case Refused():
                return self._requests.reject(event.text)
            case Admitted():
                self._budget.prices = event.prices
            case ToolsResolved():
                return self._toolbox.resolved(event.result)
            case ToolsAdded():
                return self._toolbox.added(event.tools)
            case SubAgentsAdded():
                return self._toolbox.added(self._toolbox.sub_agents())
            case ModelAnswered():
                self._model_answered(event.outcome, now)
            case SummaryAnswered():
                self._summary_answered(event.outcome, now)
            case ModelCallSent():
                self._marks.capacity_ready = False  # a limiter's word from here is for this call
            case WaitingForCapacity():
                self._marks.waiting_for_capacity = event.endpoint
            case CapacityKept():
                self._marks.capacity_ready = True
            case GuardrailsChecked():
                self._guardrails_checked(event)
            case ApprovalsChecked():
                self._batch.approvals_checked(event.verdicts)
            case CallsDescribed():
                self._batch.calls_described(event.descriptions)
            case TokensChecked():
                self._decisions.tokens_checked(event.verdicts, now)
            case EscalationSent():
                self._decisions.escalation_sent()
            case DeadlinesPassed():
                self._approvals.apply_defaults(event.ids, self._batch.timeout_decision, now)
            case ApprovalsWaited():
                self._batch.approvals_waited(now)
            case ChildStarted():
                self._batch.children.add(event.child_id)
            case ToolArrived():
                self._batch.arrived(event.slot, event.result)
            case ToolsFinished():
                self._tools_finished(event.results, now)
            case IdleTimedOut():
                if self._wake_ups.pending:  # the wait was for one: it fires next
                    return None
                final = last_reply(self.messages)
                self._outcome = self._finish("done", "idle_timeout", final=final)
            case ContinueAsNewDeferred():
                self._marks.progressed = False
            case WakeUpSet():
                return self._wake_ups.starter_set(event.request, event.asked)
            case WakeUpCancelled():
                return self._wake_ups.cancel(event.wake_up_id)
            case _:  # mypy proves every event has its case
                assert_never(event)
        return None

    def _cancel_requested(self, event: CancelRequested) -> str | None:
        """Stop the current turn at its next checkpoint; why not, if there is no turn."""
        state = self._state
        running = state.stage != "idle" or self._checking is not None or self._held is not None
        if not running and not self._requests.inbox and self._marks.phase != "starting":
            return self._requests.reject("cancel_turn: no turn is running")
        if state.cancel is None:
            state.cancel = event.request
        return None

    # --- deciding ------------------------------------------------------------------------

    def next_command(self, *, suggested: bool, now: datetime, changed: bool = False) -> Command:
        """What the workflow does next. ``suggested``: see ``continue_as_new_due``;
        ``changed``: see ``move_due``."""
        state = self._state
        if self._outcome is not None:
            return self._outcome
        if state.cancel is not None and self._step.calling:
            self._step.stop()
        if self._step.calling:
            return self._model_command()
        if self._held is not None:
            self._marks.phase = "checking_guardrails"
            return CheckGuardrails("output", self.spec.guardrails.output, self._held.content)
        if self._decisions.unverified:
            return VerifyTokens(self._decisions.tokens_to_check())
        notice = self._decisions.escalations()
        if notice is not None:
            return NotifyEscalation(notice)
        requests = self._requests
        if requests.ending is not None and state.stage != "tools":
            return self._finish("done", "ended", final=last_reply(self.messages))
        if state.cancel is not None:
            self._apply_cancel(now)
        if state.stage == "idle" and requests.flushes_waiting():
            requests.apply_flushes(self.messages, now)
        if requests.move is not None and state.stage != "tools":
            self._apply_move()
        if state.stage != "tools":  # a checkpoint: no batch is open
            self.messages.join_all(requests.take_injected())
        if state.stage != "tools" and requests.inbox:
            if self.spec.guardrails.input:
                self._checking = requests.take_next_message()
                self._marks.phase = "checking_guardrails"
                text = text_of(self._checking.content)
                return CheckGuardrails("input", self.spec.guardrails.input, text)
            self._deliver(requests.take_inbox())
        rules = self.spec.session
        if state.stage == "idle" and rules.end_after_reply:
            marks = self._marks
            if marks.turn_failed is not None:
                return self._finish("failed", marks.reply_reason, error=marks.turn_failed)
            if self._reply is not None:
                return self._finish("done", marks.reply_reason, final=self._reply)
        if state.stage == "idle" and self._checking is None and self._wake_ups.pending:
            due = self._wake_ups.take_due(now)
            if due:  # they start a turn, as a message would
                self._deliver(due)
        upgrade = self.view.move_due(changed)
        if upgrade or self.view.continue_as_new_due(suggested):
            return ContinueAsNew(upgrade=upgrade)
        if state.stage == "model":
            if state.model_calls_this_reply >= self.spec.stop.max_turns:
                text = f"Agent loop exceeded {self.spec.stop.max_turns} iterations"
                if self._ends_session("max_turns"):
                    return self._finish("failed", "max_turns", error=text)
                self._end_turn("max_turns", text)
                return self.next_command(suggested=suggested, now=now, changed=changed)
            spent = self._budget.spent()
            if spent is not None:
                return self._finish("done", "budget", final=last_reply(self.messages), error=spent)
            self._step.begin()
            return self._model_command()
        if state.stage == "tools":
            return self._batch_command(now)
        self._marks.phase = "idle"
        # a session holding wake-ups waits for the earliest, and is not idle meanwhile
        wake = self._wake_ups.wait(now)
        if wake is not None:
            return WaitForMessage(wake)
        timeout = rules.idle_timeout_seconds
        return WaitForMessage(timedelta(seconds=timeout) if timeout else None)

    # --- guardrails ----------------------------------------------------------------------

    def _guardrails_checked(self, event: GuardrailsChecked) -> None:
        """The verdict on the message or answer being checked: the turn fails closed
        with a failing guardrail's words."""
        verdict, failure = event.verdict, event.failure
        allowed = verdict is not None and verdict.allowed
        reason = failure or (verdict.reason if verdict else None) or "denied"
        if self._held is not None:
            answer, self._held = self._held, None
            if allowed:
                self.messages.join(answer)
                self._replied(answer, "final_answer")
                return
            self.messages.join(answer.model_copy(update={"blocked": reason}))
            self._end_turn("guardrail", guardrail_text("output", verdict, reason))
            return
        message, self._checking = self._checking, None
        assert message is not None
        if allowed:
            self._deliver([message])
            return
        self.messages.join(message.model_copy(update={"blocked": reason}))
        text = guardrail_text("input", verdict, reason)
        if self._state.stage == "idle":
            self._end_turn("guardrail", text)
        else:
            self._state.last_error = text  # a steering message: the turn goes on without it

    # --- the model -----------------------------------------------------------------------

    def _model_command(self) -> Command:
        command = self._step.command(self._state.turn + 1, self.view.model.spec)
        if isinstance(command, Pause):
            return command
        self._marks.progressed = True
        if isinstance(command, Summarise):
            self._marks.phase = "compacting"
            return command
        self._marks.phase = "calling_model"
        if not self.view.model.trimmed_by_workers:
            self._marks.trimmed = self._trimmed_count()
        return command

    def _trimmed_count(self) -> int:
        """Messages the request about to be made leaves out to fit the context budget."""
        rules = self._step.shortened_context or self.view.model.spec.context
        if rules.budget_tokens is None:
            return 0
        return prepare_request_messages(self.messages, rules).left_out

    def _model_answered(self, outcome: ModelOutcome, now: datetime) -> None:
        """The model call's outcome: a reply, a failure, or a cancellation; with the
        tokens of attempts whose replies were lost, billed all the same."""
        for usage in outcome.unbilled:
            self._budget.count(usage, self.view.model.price, self.view.model.spec.name)
        if isinstance(outcome, ModelReply):
            if outcome.left_out is not None:
                self._marks.trimmed = outcome.left_out
            self._marks.files_left_out = outcome.files_left_out
            if outcome.called is not None:
                self._batch.tools_called(outcome.message, outcome.called)
            if outcome.arguments_checked:
                self._checked_reply = outcome.message
            self._model_replied(outcome.message)
        elif isinstance(outcome, ModelFailure):
            self._model_failed(outcome.kind, outcome.text, outcome.retry_after, now)
        else:
            self._step.stop()

    def _summary_answered(self, outcome: ModelOutcome, now: datetime) -> None:
        """The summary call's outcome: the summary, a failure, or a cancellation."""
        if isinstance(outcome, ModelReply):
            self._summarised(outcome.message, now)
        else:
            self._model_answered(outcome, now)

    def _summarised(self, summary: AssistantMessage, now: datetime) -> None:
        """The summary stands in for earlier messages from now on (they stay)."""
        self._step.summarised(summary, now)
        model = self.view.model.spec
        writer = model.context.summary_model
        if writer is None or writer == model.name:
            self._budget.count(summary.usage, self.view.model.price, model.name)
        else:  # the model that wrote it, at its own price (the worker's)
            self._budget.count(summary.usage, self._budget.prices.get(writer), writer)

    def _model_replied(self, assistant: AssistantMessage) -> None:
        checked, self._checked_reply = assistant is self._checked_reply, None
        if self._step.hop:  # a fallback answered: the message says which
            assistant = assistant.model_copy(update={"model": self.view.model.spec.name})
        self._step.calling = False
        state = self._state
        state.turn += 1
        state.model_calls_this_reply += 1
        self._budget.count(assistant.usage, self.view.model.price, self.view.model.spec.name)
        self._budget.count(assistant.voided_usage, self.view.model.price, self.view.model.spec.name)
        if assistant.is_error:
            state.last_error = assistant.error
        reason = None
        if not assistant.is_error:
            called = self._batch.tools_called(assistant) if checked else ()
            # ``unparsed_output: raw``: an answer that fails the schema is taken as it is
            rescued_schema = (
                None if self.spec.rescue.unparsed_output == "raw" else (self.spec.output_schema)
            )
            reason = unusable_reason(
                assistant,
                self._toolbox.active,
                rescued_schema,
                checked=checked,
                called=called,
            )
        cut = truncated_reason(assistant)
        rule = self.spec.stop.on_truncated
        if reason is not None:
            self._rescued(self._rescue.unusable(assistant, reason))
        elif cut is not None and rule != "accept":
            failure = self._rescue.truncated(assistant, cut) if rule == "continue" else cut
            if failure is not None:
                if rule == "fail":
                    self.messages.join(assistant)
                self._end_turn("truncated", f"the model's answer was cut off: {cut}")
        elif assistant.tool_calls:
            self.messages.join(assistant)
            state.stage = "tools"
        elif self.spec.guardrails.output and not assistant.is_error:
            self._held = assistant  # the answer joins the array with its verdict
        else:
            self.messages.join(assistant)
            self._replied(assistant, "final_answer")

    def _rescued(self, failure: str | None) -> None:
        """A rescue that could not help ends the turn with its words; one that helps
        asks the model again, or first runs the unusable turn's calls."""
        if failure is not None:
            self._end_turn("unusable_reply", failure)
        else:
            self._state.stage = "tools" if self._rescue.calls_first else "model"

    def _model_failed(
        self, kind: str | None, text: str, retry_after: timedelta | None, now: datetime
    ) -> None:
        """A model call failed: another attempt after a pause while the model's own
        failures leave attempts, else the turn ends with ``text`` and the session waits
        for the next message (``stop.end_session_on`` ``model_error``: the session fails)."""
        if self._step.retried(kind, retry_after, self.view.model.spec):
            return
        if self._step.overflowed(kind, text):
            self._step.shorten_request(self.view.model.spec)
            return
        if self._step.fell_back(kind, len(self.view.model.base.fallbacks)):
            return
        summarising = self._step.summarising is not None
        self._step.stop()
        if summarising:
            self._end_turn("compaction_failed", f"compaction failed: {text}")
            return
        self._state.last_error = text
        self.messages.join(
            AssistantMessage(
                content="",
                is_error=True,
                error=text,
                timestamp=epoch_ms(now),
                agent_name=self.view.model.agent_name,
            )
        )
        if self._ends_session("model_error"):
            self._outcome = self._finish("failed", "error", error=text)
        else:
            self._end_turn("error", text)

    def _ends_session(self, failure: Literal["max_turns", "model_error"]) -> bool:
        """A turn that failed this way ends the session: a one-shot session's always,
        another's when its spec says so."""
        return self.spec.session.end_after_reply or failure in self.spec.stop.end_session_on

    # --- a tool batch (decided by ``ToolBatch``) ------------------------------------------

    def _batch_command(self, now: datetime) -> Command:
        last = self.messages[-1]
        assert isinstance(last, AssistantMessage) and last.tool_calls
        command = self._batch.next_command(last, self._state.turn, now)
        # (a batch's pages are described and asked each in a workflow task of its own)
        if isinstance(command, DescribeCalls | AwaitApprovals | Pause):
            self._marks.phase = "awaiting_approval"
        elif isinstance(command, RunTools):
            self._marks.progressed = True
            self._marks.phase = "running_tools"
        return command

    def _tools_finished(self, results: dict[int, ToolMessage], now: datetime) -> None:
        """The batch's calls are done (``results``: by slot, those not told as they
        arrived, ``tool_arrived``): its results are appended in request order, whatever
        order they finished in."""
        why = not_completed(self._state.cancel, self._requests.ending)
        joined = self._batch.finished(results, why, now)
        self.messages.join_all(joined.results)
        if joined.handoff is not None and self._swarm is not None:
            self._swarm.hand_over(joined.handoff)
        self._decisions.batch_over()
        for result in joined.spent:  # what tools spent on models (sub-agents) counts too
            assert result.usage is not None
            self._budget.count(result.usage, self.view.model.price, f"tool {result.tool_name}")
        self._state.stage = "model"
        reason = self._rescue.take_after_tools()
        if reason is not None:
            self._rescued(self._rescue.rescue(reason, joined.results[-1].timestamp))
            return
        if joined.stop is not None:
            self._replied(joined.stop, f"stop_tool:{joined.stop.tool_name}")

    # --- the turn's own transitions -------------------------------------------------------

    def _deliver(self, messages: list[UserMessage]) -> None:
        """Queued messages join the array and start (or steer) a turn."""
        if self._swarm is not None:  # addressed to the agent answering
            messages = [
                m.model_copy(update={"agent_name": self.view.model.agent_name}) for m in messages
            ]
        self.messages.join_all(messages)
        state = self._state
        if state.stage == "idle":
            state.model_calls_this_reply = 0
            self._rescue.new_reply()
        state.stage = "model"
        self._marks.phase = "calling_model"  # busy from here (a continue-as-new may come first)
        self._reply, self._marks.turn_failed = None, None

    def _end_turn(self, reason: str, error: str) -> None:
        """The turn is over without an answer (a guardrail, a cancellation)."""
        self._state.stage = "idle"
        self._reply, self._marks.reply_reason = None, reason
        self._state.last_error = self._marks.turn_failed = error

    def _replied(self, reply: Reply, reason: str) -> None:
        """The model's answer to the latest message is complete: the session goes idle."""
        self._state.stage = "idle"
        self._reply, self._marks.reply_reason = reply, reason
        self._structured = None
        schema = self.spec.output_schema
        if schema is not None and isinstance(reply, AssistantMessage) and not reply.is_error:
            parsed = parse_structured_output(reply.content, schema)
            self._structured = parsed.value
            if parsed.error:  # the raw text stands in, and the error says why
                self._structured = parsed.raw
                self._state.last_error = f"structured output: {parsed.error}"

    def _apply_cancel(self, now: datetime) -> None:
        """A ``cancel_turn``, at a checkpoint: a batch's unrun calls get results saying so,
        a turn waiting for the model ends."""
        state = self._state
        request = state.cancel
        assert request is not None
        why = cancel_text(request.by, request.reason)
        if state.stage == "tools":
            last = self.messages[-1]
            assert isinstance(last, AssistantMessage)
            self._batch.cancel(last, state.turn, why, now)
            self._tools_finished({}, now)
        state.cancel = None
        if state.stage == "model":
            self._end_turn("cancelled", why)
        else:
            self._requests.reject(f"cancel_turn: the turn had ended before {why}")

    def _apply_move(self) -> None:
        """Between turns or model calls (never in a tool batch or a model call)."""
        move = self._requests.take_move()
        assert self._swarm is not None and move is not None
        if move.agent != self._swarm.active:
            self._swarm.go_to(move.agent)

    def _finish(
        self, status: Any, stop_reason: str, *, final: Reply | None = None, error: str | None = None
    ) -> Finish:
        """The session's end: its result (a structured output only with its own reply)."""
        state = self._state
        if status == "failed":
            state.last_error = error
        elif state.last_error and state.last_error.startswith("structured output:"):
            error = state.last_error
        self._marks.phase = status
        return Finish(
            AgentResult(
                status=status,
                stop_reason=stop_reason,
                final=final,
                structured_output=self._structured if final is self._reply else None,
                error=error,
                turns=state.turn,
                message_count=len(self.messages),
                usage=self._budget.usage,
                spend=dict(self._budget.spend),
            )
        )
