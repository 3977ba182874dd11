"""The session as a pure state machine: every rule of the turn loop, without Temporal.

A ``Session`` owns one ``SessionState`` (the very object continue-as-new carries) and
the message array inside it. It takes events (a message arrived, the model replied
or failed, tools finished, approvals were decided or their wait ended, the end was
requested) as method calls, and ``next_command`` says what to do next: call the
model, pause, check or await approvals, run tool groups, wait for a message,
continue as new, or finish. The workflow only carries commands out and reports back,
so the loop runs in milliseconds in a test, with no server.

The Session is the one decision point; the work of deciding is shared with its
collaborators (``ToolBatch``, ``Decisions``, ``Budget``, ``Rescue``, ``Swarm``). Every
time it is given is a ``datetime`` (the workflow's ``workflow.now()``).

No I/O, no clock (times are given), no randomness: deterministic by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal

from durable_agent.core import (
    AgentInput,
    AgentResult,
    AgentSpec,
    AssistantMessage,
    CancelTurnSignal,
    GuardrailVerdict,
    ModelPrice,
    ModelSetup,
    ModelSpec,
    Phase,
    ResolvedTool,
    SessionStatus,
    SystemMessage,
    ToolMessage,
    Transcript,
    UserMessage,
    WindowMarks,
    root_of,
    text_of,
)

from ._approvals import Approvals
from ._batch import ToolBatch
from ._budget import Budget
from ._commands import (
    AwaitApprovals,
    CheckGuardrails,
    Command,
    ContinueAsNew,
    DescribeCalls,
    Finish,
    NotifyEscalation,
    Pause,
    RunTools,
    Summarise,
    VerifyTokens,
    WaitForMessage,
)
from ._decisions import Decisions
from ._gate import Gate
from ._loop_rules import epoch_ms, last_reply
from ._model_step import ModelStep
from ._opening import instructions_message, open_conversation
from ._requests import Requests
from ._rescue import Rescue, truncated_reason, unusable_reason
from ._state import SessionState
from ._swarm import Swarm
from ._tool_results import not_completed
from ._toolbox import Toolbox
from ._turn import (
    Reply,
    apply_cancel,
    apply_move,
    deliver,
    end_turn,
    finish,
    guardrail_verdict,
    replied,
)
from ._views import Purpose, model_setup, session_status, trimmed_count

INBOX_CARRY_CHARS = 500_000
"""Queued messages continue-as-new may carry inline; more wait for the turn boundary."""


class Session:
    def __init__(self, spec: AgentSpec, state: SessionState) -> None:
        self.spec = spec
        self.state = state
        self.messages = Transcript.adopt(state.messages, root_of(state.chain))
        self.window_marks = WindowMarks()
        """Where requests start, kept up as the array grows (``status`` reads it)."""
        self.approvals = Approvals(state, spec.approvals.escalation)
        self.swarm = Swarm(spec, spec.swarm, state) if spec.swarm is not None else None
        self.toolbox = Toolbox(spec, state, self.swarm)
        self.gate = Gate(spec.approvals, state)
        self.budget = Budget(spec, state)
        self.requests = Requests(spec, state, self.swarm, self.budget, self.gate)
        self.decisions = Decisions(
            spec,
            state,
            self.approvals,
            self.gate,
            lambda: self.active_tools,
            self.requests.reject,
            self.interrupted,
            lambda: self.batch.running_children(),  # the batch is made next
        )
        self.batch = ToolBatch(
            spec, state, self.gate, self.approvals, lambda: self.active_tools, self.swarm
        )
        self.rescue = Rescue(spec, state, self.messages)
        self.phase: Phase = "starting"
        self.progressed = False
        """This run has done work: continue-as-new may follow."""
        self.reply: Reply | None = None
        self.reply_reason = "final_answer"
        self.structured: Any = None
        self.step = ModelStep(self.messages)
        self._outcome: Finish | None = None
        self.checking: UserMessage | None = None
        """A user message its input guardrails are checking (not in the array yet)."""
        self.held: AssistantMessage | None = None
        """A final answer its output guardrails are checking (not in the array yet)."""
        self.turn_failed: str | None = None
        """Why the latest turn ended without an answer (guardrail, cancellation)."""
        self.trimmed = 0
        """Messages the latest request left out to fit the context budget."""
        self.waiting_for_capacity: str | None = None
        """The limited endpoint the model call waits for room on (``status`` shows it)."""
        self.capacity_ready = False
        """The endpoint's limiter said room is kept for the waiting call."""
        self.rescue_enabled = True
        """Rescue unusable model turns (off only to replay histories from before it)."""
        self.checked_reply: AssistantMessage | None = None
        """A reply whose calls' arguments its worker found to be JSON objects."""
        self.truncation_checked = True
        """A cut answer is not taken as complete (``stop.on_truncated``); the workflow
        says (patch ``truncated-answers``) whenever a cut answer arrives."""
        self.turn_failures_end_turns: Callable[[], bool] = lambda: True
        """Asked when a turn fails for good (the workflow asks its patch: runs recorded
        before ended the session there)."""
        self.context_overflow_trims: Callable[[], bool] = lambda: True
        """Asked when a model refused a request as too long (runs recorded before did
        not try a shorter one)."""

    # --- starting ----------------------------------------------------------------------

    @property
    def tools(self) -> dict[str, ResolvedTool]:
        """The tools every agent has (a one-agent session's tools)."""
        return self.toolbox.tools

    @property
    def active_tools(self) -> dict[str, ResolvedTool]:
        """The tools of the agent answering now."""
        return self.toolbox.active

    @property
    def model_spec(self) -> ModelSpec:
        """The model the step calls now: the answering agent's, or a fallback of it."""
        base = self.base_model
        return base if self.step.hop == 0 else base.fallbacks[self.step.hop - 1]

    @property
    def price(self) -> ModelPrice | None:
        """What the model the step calls costs (the spec's price, else the worker's)."""
        return self.budget.price_of(self.model_spec)

    @property
    def base_model(self) -> ModelSpec:
        """The model of the agent answering now (its fallbacks in ``fallbacks``)."""
        return self.spec.model if self.swarm is None else self.swarm.model

    @property
    def agent_name(self) -> str | None:
        """The active agent of a swarm (``None`` in a one-agent session)."""
        return None if self.swarm is None else self.swarm.active

    def start(self, request: AgentInput, now: datetime) -> None:
        """The conversation of a fresh session: instructions, given history, first message."""
        open_conversation(self.spec, self.state, self.messages, request, self._first(), now)

    def opening_message(self, now: datetime) -> SystemMessage | None:
        """The system message ``start`` opens an empty conversation with."""
        return instructions_message(self.spec, self._first(), now)

    def _first(self) -> tuple[str | None, str | None]:
        """The name and instructions of the agent that opens (``None, None``: one agent)."""
        swarm = self.swarm
        return (None, None) if swarm is None else (swarm.active, swarm.agent.instructions)

    # --- what people send (recorded by ``Requests``) ----------------------------------

    def cancel_requested(self, request: CancelTurnSignal) -> str | None:
        """Stop the current turn at its next safe point; why not, if there is no turn."""
        state = self.state
        running = state.stage != "idle" or self.checking is not None or self.held is not None
        if not running and not state.inbox and self.phase != "starting":
            return self.requests.reject("cancel_turn: no turn is running")
        if state.cancel is None:
            state.cancel = request
        return None

    # --- deciding ------------------------------------------------------------------------

    def continue_as_new_due(self, suggested: bool) -> bool:
        """``suggested``: the run's history is long (the server says so, or the spec's
        event limit is reached). Only a run that did some work hands over, and not while
        queued messages are too big to carry (they join the array at the boundary)."""
        if not (self.progressed and suggested):
            return False
        if self.batch.decided:
            return False  # its decisions live in the batch now: it runs first
        return self._inbox_carries()

    def move_due(self, changed: bool) -> bool:
        """``changed``: the workers' owner made another build current. The session goes to
        it now if its agent upgrades on its own or a person asked, and only at a turn
        boundary (no tool batch open: its calls finish on the build that started them)."""
        if not changed or self.state.stage == "tools":
            return False
        if self.spec.session.upgrade != "auto" and not self.state.move_to_current:
            return False
        return self._inbox_carries()

    def _inbox_carries(self) -> bool:
        """Queued messages are small enough to carry (else they join the array first)."""
        queued = sum(len(text_of(m.content)) for m in self.state.inbox)
        return queued <= INBOX_CARRY_CHARS

    def continue_as_new_deferred(self) -> None:
        """The state did not fit one payload: go on in this run until more work is done."""
        self.progressed = False

    def interrupted(self, suggested: bool) -> bool:
        """A wait must end early: the session is ending, the turn is cancelled, or a
        continue-as-new is due."""
        state = self.state
        return (
            state.ending is not None
            or state.cancel is not None
            or self.continue_as_new_due(suggested)
        )

    def idle_wait_over(self, suggested: bool, changed: bool = False) -> bool:
        """Waiting for a message ends: one arrived, a flush is due, a move to the current
        build is due, or as ``interrupted``."""
        state = self.state
        waiting = state.inbox or state.injected or state.flushes or state.move or state.unverified
        return bool(waiting) or self.interrupted(suggested) or self.move_due(changed)

    def next_command(self, *, suggested: bool, now: datetime, changed: bool = False) -> Command:
        """What the workflow does next. ``suggested``: see ``continue_as_new_due``;
        ``changed``: see ``move_due``."""
        state = self.state
        if self._outcome is not None:
            return self._outcome
        if state.cancel is not None and self.step.calling:
            self.step.stop()
        if self.step.calling:
            return self._model_command()
        if self.held is not None:
            self.phase = "checking_guardrails"
            return CheckGuardrails("output", self.spec.guardrails.output, self.held.content)
        if state.unverified:
            return VerifyTokens(self.decisions.tokens_to_check())
        notice = self.decisions.escalations()
        if notice is not None:
            return NotifyEscalation(notice)
        if state.ending is not None and state.stage != "tools":
            return finish(self, "done", "ended", final=last_reply(self.messages))
        if state.cancel is not None:
            apply_cancel(self, now)
        if state.stage == "idle" and state.flushes:
            self.requests.apply_flushes(self.messages, now)
        if state.move is not None and state.stage != "tools":
            apply_move(self)
        if state.stage != "tools" and state.injected:  # a safe point: no batch is open
            self.messages.extend(state.injected)
            state.injected.clear()
        if state.stage != "tools" and state.inbox:
            if self.spec.guardrails.input:
                self.checking = state.inbox.pop(0)
                self.phase = "checking_guardrails"
                text = text_of(self.checking.content)
                return CheckGuardrails("input", self.spec.guardrails.input, text)
            deliver(self, list(state.inbox))
            state.inbox.clear()
        rules = self.spec.session
        if state.stage == "idle" and rules.end_after_reply:
            if self.turn_failed is not None:
                return finish(self, "failed", self.reply_reason, error=self.turn_failed)
            if self.reply is not None:
                return finish(self, "done", self.reply_reason, final=self.reply)
        upgrade = self.move_due(changed)
        if upgrade or self.continue_as_new_due(suggested):
            return ContinueAsNew(upgrade=upgrade)
        if state.stage == "model":
            if state.model_calls_this_reply >= self.spec.stop.max_turns:
                text = f"Agent loop exceeded {self.spec.stop.max_turns} iterations"
                if self._ends_session("max_turns"):
                    return finish(self, "failed", "max_turns", error=text)
                end_turn(self, "max_turns", text)
                return self.next_command(suggested=suggested, now=now, changed=changed)
            spent = self.budget.spent()
            if spent is not None:
                return finish(self, "done", "budget", final=last_reply(self.messages), error=spent)
            self.step.begin()
            return self._model_command()
        if state.stage == "tools":
            return self._batch_command(now)
        self.phase = "idle"
        timeout = rules.idle_timeout_seconds
        return WaitForMessage(timedelta(seconds=timeout) if timeout else None)

    def fail(self, text: str) -> AgentResult:
        """End the session as failed (a problem outside the loop's rules, such as a
        message too large for any payload)."""
        return finish(self, "failed", "error", error=text).result

    def idle_timed_out(self) -> None:
        self._outcome = finish(self, "done", "idle_timeout", final=last_reply(self.messages))

    # --- guardrails, cancellation, flushes -----------------------------------------------

    def guardrails_checked(
        self, verdict: GuardrailVerdict | None, failure: str | None = None
    ) -> None:
        """The verdict on the message or answer being checked (``failure``: the guardrail
        kept failing; the turn fails closed with its words)."""
        guardrail_verdict(self, verdict, failure)

    # --- the model -----------------------------------------------------------------------

    def _model_command(self) -> Command:
        command = self.step.command(self.state.turn + 1, self.model_spec)
        if isinstance(command, Pause):
            return command
        self.progressed = True
        if isinstance(command, Summarise):
            self.phase = "compacting"
            return command
        self.phase = "calling_model"
        self.trimmed = trimmed_count(self)
        return command

    def model_setup(self, purpose: Purpose = "reply") -> ModelSetup:
        """What the active agent's model calls share (see ``views.model_setup``)."""
        return model_setup(self, purpose)

    def summarised(self, summary: AssistantMessage, now: datetime) -> None:
        """The summary stands in for earlier messages from now on (they stay)."""
        self.step.summarised(summary, now)
        self.budget.count(summary.usage, self.price, self.model_spec.name)

    def model_replied(self, assistant: AssistantMessage) -> None:
        checked, self.checked_reply = assistant is self.checked_reply, None
        if self.step.hop:  # a fallback answered: the message says which
            assistant = assistant.model_copy(update={"model": self.model_spec.name})
        self.step.calling = False
        state = self.state
        state.turn += 1
        state.model_calls_this_reply += 1
        self.budget.count(assistant.usage, self.price, self.model_spec.name)
        self.budget.count(assistant.voided_usage, self.price, self.model_spec.name)
        if assistant.is_error:
            state.last_error = assistant.error
        reason = None
        if self.rescue_enabled and not assistant.is_error:
            called = self.batch.tools_called(assistant) if checked else ()
            reason = unusable_reason(
                assistant,
                self.active_tools,
                self.spec.output_schema,
                checked=checked,
                called=called,
            )
        cut = truncated_reason(assistant) if self.truncation_checked else None
        rule = self.spec.stop.on_truncated
        if reason is not None:
            self._rescued(self.rescue.unusable(assistant, reason))
        elif cut is not None and rule != "accept":
            failure = self.rescue.truncated(assistant, cut) if rule == "continue" else cut
            if failure is not None:
                if rule == "fail":
                    self.messages.append(assistant)
                end_turn(self, "truncated", f"the model's answer was cut off: {cut}")
        elif assistant.tool_calls:
            self.messages.append(assistant)
            state.stage = "tools"
        elif self.spec.guardrails.output and not assistant.is_error:
            self.held = assistant  # the answer joins the array with its verdict
        else:
            self.messages.append(assistant)
            replied(self, assistant, "final_answer")

    def _rescued(self, failure: str | None) -> None:
        """A rescue that could not help ends the turn with its words."""
        if failure is not None:
            end_turn(self, "unusable_reply", failure)

    def model_failed(
        self, kind: str | None, text: str, retry_after: timedelta | None, now: datetime
    ) -> None:
        """A model call failed: another attempt after a pause while the model's own
        failures leave attempts, else the turn ends with ``text`` and the session waits
        for the next message (``stop.end_session_on`` ``model_error``: the session fails)."""
        if self.step.retried(kind, retry_after, self.model_spec):
            return
        if self.step.overflowed(kind, text) and self.context_overflow_trims():
            self.step.squeeze_more(self.model_spec)
            return
        if self.step.fell_back(kind, len(self.base_model.fallbacks)):
            return
        summarising = self.step.summarising is not None
        self.step.stop()
        if summarising:
            end_turn(self, "compaction_failed", f"compaction failed: {text}")
            return
        self.state.last_error = text
        self.messages.append(
            AssistantMessage(
                content="",
                is_error=True,
                error=text,
                timestamp=epoch_ms(now),
                agent_name=self.agent_name,
            )
        )
        if self._ends_session("model_error"):
            self._outcome = finish(self, "failed", "error", error=text)
        else:
            end_turn(self, "error", text)

    def _ends_session(self, failure: Literal["max_turns", "model_error"]) -> bool:
        """A turn that failed this way ends the session: a one-shot session's always,
        another's when its spec says so (or when it ran before turns could end so)."""
        if self.spec.session.end_after_reply or failure in self.spec.stop.end_session_on:
            return True
        return not self.turn_failures_end_turns()

    def model_cancelled(self) -> None:
        """The model call (or summary) was stopped by ``cancel_turn``: nothing joins."""
        self.step.stop()

    # --- a tool batch (decided by ``ToolBatch``) ------------------------------------------

    def _batch_command(self, now: datetime) -> Command:
        last = self.messages[-1]
        assert isinstance(last, AssistantMessage) and last.tool_calls
        command = self.batch.next_command(last, now)
        if isinstance(command, DescribeCalls | AwaitApprovals | Pause):  # (pages apart)
            self.phase = "awaiting_approval"
        elif isinstance(command, RunTools):
            self.progressed = True
            self.phase = "running_tools"
        return command

    def tools_finished(self, results: dict[int, ToolMessage], now: datetime) -> None:
        """The batch's calls are done (``results``: by slot, those not told as they
        arrived, ``batch.arrived``): its results are appended in request order, whatever
        order they finished in."""
        joined = self.batch.finished(results, not_completed(self.state), now)
        self.messages.extend(joined.results)
        if joined.handoff is not None and self.swarm is not None:
            self.swarm.hand_over(joined.handoff)
        self.state.child_pending.clear()  # the batch's sub-agents are all over
        self.state.forwards.clear()
        for result in joined.spent:  # what tools spent on models (sub-agents) counts too
            assert result.usage is not None
            self.budget.count(result.usage, self.price, f"tool {result.tool_name}")
        self.state.stage = "model"
        reason, self.state.rescue_after_tools = self.state.rescue_after_tools, None
        if reason is not None:
            self._rescued(self.rescue.rescue(reason, joined.results[-1].timestamp))
            return
        if joined.stop is not None:
            replied(self, joined.stop, f"stop_tool:{joined.stop.tool_name}")

    # --- continue-as-new and the end -----------------------------------------------------

    def for_next_run(self) -> SessionState:
        """The state a fresh run continues from (the array inline; the workflow swaps it
        for a reference when it does not fit one payload)."""
        return self.state.model_copy(update={"runs": self.state.runs + 1, "transcript": None})

    def status(self) -> SessionStatus:
        return session_status(self)
