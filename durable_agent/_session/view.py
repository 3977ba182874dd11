"""The Session as it may be read: what queries, the live feed, the workflow's waits and
the activities' inputs see. Nothing here changes the session.

A ``SessionView`` reads the same state and parts the Session writes, so it is always
current; the Session makes one and hands it out as ``Session.view``. The waits ask it
when they are over (``idle_wait_over``, ``approvals_wait_over``): the workflow only
times them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from durable_agent._contracts.approvals import (
    ApprovalPolicyView,
    ApprovalSignal,
    DecisionResult,
    PendingApproval,
)
from durable_agent._contracts.boundary import ModelSetup, Phase, SessionStatus
from durable_agent._spec.document import AgentSpec, ModelPrice, ModelSpec
from durable_agent._wire.context import WindowMarks
from durable_agent._wire.messages import SystemMessage, Usage, text_of
from durable_agent._wire.outgoing import ModelInputs
from durable_agent._wire.transcript import Transcript

from .batch import ToolBatch
from .decisions import Approvals, Decisions
from .gate import Gate
from .model_step import Budget, ModelStep
from .protocol import Checked, DecisionArrived, Injected, MessageArrived, WakeUpCancelled, WakeUpSet
from .requests import Requests
from .state import SessionState, instructions_message, latest_finish_reason
from .toolbox import Swarm, Toolbox
from .wake_ups import WakeUps

INBOX_CARRY_CHARS = 500_000
"""Queued messages continue-as-new may carry inline; more wait for the turn boundary."""
#: Waiting calls ``status`` lists at most: a batch of thousands would pass the 2 MB a
#: query's answer may carry (``SessionHandle.pending_approvals`` reads all, in pages).
STATUS_PENDING_SHOWN = 1000

Purpose = Literal["reply", "summary"]


@dataclass
class TurnMarks:
    """What the turn loop shows as it goes, written by the Session, read by the view."""

    phase: Phase = "starting"
    trimmed: int = 0
    """Messages the latest request left out to fit the context budget."""
    files_left_out: tuple[str, ...] = ()
    """What the latest request said of the files and images it left out."""
    reply_reason: str = "final_answer"
    """Why the latest turn ended (the live feed tells it)."""
    turn_failed: str | None = None
    """Why the latest turn ended without an answer (guardrail, cancellation)."""
    waiting_for_capacity: str | None = None
    """The limited endpoint the model call waits for capacity on."""
    capacity_ready: bool = False
    """The endpoint's limiter said capacity is kept for the waiting call."""
    progressed: bool = False
    """This run has done work: continue-as-new may follow."""


@dataclass(frozen=True)
class Parts:
    """The Session's parts, each keeping its slice of the state and its rules."""

    approvals: Approvals
    swarm: Swarm | None
    toolbox: Toolbox
    gate: Gate
    budget: Budget
    requests: Requests
    decisions: Decisions
    batch: ToolBatch
    step: ModelStep
    wake_ups: WakeUps


class LoopView:
    """Where the turn loop is: what the live feed tells and the workflow's waits watch."""

    def __init__(self, state: SessionState, parts: Parts, marks: TurnMarks) -> None:
        self._state, self._parts, self._marks = state, parts, marks

    @property
    def phase(self) -> Phase:
        return self._marks.phase

    @property
    def turn(self) -> int:
        return self._state.turn

    @property
    def runs(self) -> int:
        """Runs of this session so far (1 + continue-as-new cycles)."""
        return self._state.runs

    @property
    def chain(self) -> Literal[2] | None:
        """The transcript chain the session's messages are stored in."""
        return self._state.chain

    @property
    def usage(self) -> Usage:
        return self._parts.budget.usage

    @property
    def trimmed(self) -> int:
        return self._marks.trimmed

    @property
    def reply_reason(self) -> str:
        return self._marks.reply_reason

    @property
    def turn_failure(self) -> str | None:
        """Why the latest turn ended without an answer (``None``: it did not)."""
        return self._marks.turn_failed

    @property
    def queued(self) -> int:
        """Messages waiting for the next turn boundary."""
        return len(self._parts.requests.inbox)

    @property
    def cancelling(self) -> bool:
        """A ``cancel_turn`` waits for the next checkpoint."""
        return self._state.cancel is not None

    @property
    def ending(self) -> bool:
        """Someone asked the session to end."""
        return self._parts.requests.ending is not None

    @property
    def move_to_current(self) -> bool:
        """A person asked this (pinned) session to go to the current build."""
        return self._state.move_to_current

    @property
    def capacity_ready(self) -> bool:
        """The endpoint's limiter said capacity is kept for the waiting model call."""
        return self._marks.capacity_ready


class ModelView:
    """The model the next call goes to and what the call carries."""

    def __init__(
        self, spec: AgentSpec, state: SessionState, messages: Transcript, parts: Parts
    ) -> None:
        self._spec, self._state, self._messages, self._parts = spec, state, messages, parts

    @property
    def agent_name(self) -> str | None:
        """The active agent of a swarm (``None`` in a one-agent session)."""
        swarm = self._parts.swarm
        return None if swarm is None else swarm.active

    @property
    def base(self) -> ModelSpec:
        """The model of the agent answering now (its fallbacks in ``fallbacks``)."""
        swarm = self._parts.swarm
        return self._spec.model if swarm is None else swarm.model

    @property
    def spec(self) -> ModelSpec:
        """The model the step calls now: the answering agent's, or a fallback of it."""
        base, hop = self.base, self._parts.step.hop
        return base if hop == 0 else base.fallbacks[hop - 1]

    @property
    def price(self) -> ModelPrice | None:
        """What the model the step calls costs (the spec's price, else the worker's)."""
        return self._parts.budget.price_of(self.spec)

    @property
    def trimmed_by_workers(self) -> bool:
        """The worker that makes a model call counts what its request left out (a reply
        that comes with its digest brings the count: a session in the version-2 hash
        chain; one opened before keeps counting in the workflow for its life)."""
        return self._state.chain == 2

    @property
    def reply_id(self) -> str | None:
        """The stable id the model's reply takes when it joins the array (``None``: this
        session gives no ids); the worker that makes the reply is told it."""
        return self._messages.next_id()

    def setup(self, purpose: Purpose = "reply") -> ModelSetup:
        """What the active agent's model calls share (sent once, then by digest): its
        model, options and tools; for a swarm, also its name and prompt."""
        model, swarm = self.spec, self._parts.swarm
        # unset inputs are left out: the setup's digest stays what it was without them
        inputs = None if model.inputs == ModelInputs() else model.inputs
        if purpose == "summary":
            return ModelSetup(
                endpoint=model.endpoint,
                model=model.context.summary_model or model.name,
                options=model.options,
                reasoning=model.reasoning,
                stream=False,
                inputs=inputs,
            )
        spec = self._spec
        return ModelSetup(
            endpoint=model.endpoint,
            model=model.name,
            options=model.options,
            reasoning=model.reasoning,
            stream=model.stream,
            output_schema=spec.output_schema,
            tools=[t.definition for t in self._parts.toolbox.active.values()],
            context=self._parts.step.shortened_context
            or (model.context if model.context.budget_tokens else None),
            agent=None if swarm is None else swarm.active,
            instructions=None if swarm is None else swarm.agent.instructions,
            # a reply hook rewrites the reply: its raw text must not stream to readers first
            live=spec.session.live_deltas and not spec.hooks.reply,
            inputs=inputs,
            hooks=spec.hooks if spec.hooks.names() else None,
            price=self.price,
        )

    def setup_key(self, purpose: Purpose) -> str:
        """What the model setup of ``purpose`` changes with (the agent, a fallback, a
        shorten): calls with the same key share one setup."""
        step = self._parts.step
        return f"{purpose}:{self.agent_name or ''}:{step.hop}:{step.shortenings}"


class ApprovalsView:
    """The approvals asked and decided, and what people's decisions became."""

    def __init__(self, spec: AgentSpec, parts: Parts) -> None:
        self._spec, self._parts = spec, parts

    def page_for(self, count: int) -> int:
        """How many of ``count`` approvals' worth of work one workflow task does."""
        return self._parts.approvals.page_for(count)

    def pending(self) -> list[PendingApproval]:
        """Undecided approvals: this session's, then its sub-agents' (their ids prefixed
        with the child's call, decided through this session)."""
        return self._parts.decisions.pending_approvals()

    def undecided(self) -> list[PendingApproval]:
        """This session's own undecided approvals (what a sub-agent tells its parent)."""
        return self._parts.approvals.undecided()

    def asked(self) -> list[PendingApproval]:
        """Every approval asked and not yet taken into its batch, decided or not."""
        return self._parts.approvals.asked()

    def decided(self) -> Mapping[str, Any]:
        """The decisions recorded and not yet taken into their batch, by approval id."""
        return self._parts.approvals.decided()

    def by_id(self) -> Mapping[str, PendingApproval]:
        return self._parts.approvals.find_all()

    def newly_decided(self) -> list[str]:
        """Ids decided since the live feed last told them (``DecisionsTold``), in order."""
        return list(self._parts.approvals.newly_decided)

    def policy(self) -> ApprovalPolicyView:
        """How the gate decides: the spec's settings, each tool's own approvers, grants."""
        approvers = {
            name: tool.policy.approvers
            for name, tool in self._parts.toolbox.active.items()
            if tool.policy.approvers is not None
        }
        grants = self._parts.gate.grants
        return ApprovalPolicyView(
            settings=self._spec.approvals, tool_approvers=approvers, grants=grants
        )

    def decision_outcome(self, key: str) -> DecisionResult | str | None:
        """What became of the decision the update ``key`` sent: accepted, or why not
        (``None``: not known yet)."""
        return self._parts.decisions.outcomes.get(key)

    def forwards(self, child_id: str) -> list[tuple[str, ApprovalSignal]]:
        """Decisions made through this session for the child session ``child_id`` (the
        signal's name and argument), in the order they were made (``ForwardsTaken``
        hands them to the caller)."""
        return self._parts.decisions.forwards_for(child_id)

    def next_deadline(self, ids: list[str]) -> datetime | None:
        """The earliest deadline among the undecided ``ids``."""
        return self._parts.approvals.next_deadline(ids)

    @property
    def defaults_left(self) -> bool:
        """The last ``DeadlinesPassed`` left more calls past their deadline than a page:
        the rest take their defaults in a workflow task of their own."""
        return self._parts.approvals.defaults_left


class SessionView:
    """Read-only: the loop (``loop``), the model call (``model``), the approvals
    (``approvals``), what queries answer, and when the workflow's waits end."""

    def __init__(
        self,
        spec: AgentSpec,
        state: SessionState,
        messages: Transcript,
        parts: Parts,
        marks: TurnMarks,
    ) -> None:
        self.spec = spec
        self.messages = messages
        self.loop = LoopView(state, parts, marks)
        self.model = ModelView(spec, state, messages, parts)
        self.approvals = ApprovalsView(spec, parts)
        self._state, self._parts, self._marks = state, parts, marks
        self._window_marks = WindowMarks()
        """Where requests start, kept up as the array grows (``status`` reads it)."""

    def result_id(self, slot: int) -> str | None:
        """The stable id the open batch's result in ``slot`` takes: the results join
        right after the message that asked for them, in slot order."""
        return self.messages.next_id(slot)

    # --- opening ----------------------------------------------------------------------

    def opening_message(self, now: datetime) -> SystemMessage | None:
        """The system message ``Session.start`` opens an empty conversation with."""
        swarm = self._parts.swarm
        first = (None, None) if swarm is None else (swarm.active, swarm.agent.instructions)
        return instructions_message(self.spec, first, now)

    def tool_names_to_resolve(self) -> list[str]:
        """The function tools the workers describe at start (a swarm's agents' too)."""
        names = [t.name for t in self.spec.tools]
        swarm = self._parts.swarm
        if swarm is not None:
            names = list(dict.fromkeys([*names, *swarm.tool_names()]))
        return names

    # --- what queries read ------------------------------------------------------------

    def status(self) -> SessionStatus:
        state, messages, marks = self._state, self.messages, self._window_marks
        parts, shown = self._parts, self._marks
        pending = parts.decisions.pending_approvals()
        swarm, requests = parts.swarm, parts.requests
        return SessionStatus(
            phase=shown.phase,
            turn=state.turn,
            message_count=len(messages),
            pending_approvals=pending[:STATUS_PENDING_SHOWN],
            pending_count=len(pending),
            usage=parts.budget.usage,
            spend=dict(parts.budget.spend),
            last_error=state.last_error,
            rejected_signals=list(requests.rejected_signals),
            queued_messages=len(requests.inbox),
            runs=state.runs,
            cancel_pending=state.cancel is not None,
            flushes_pending=requests.flushes_waiting(),
            compacted=marks.counted(messages, marks.window(messages)[0]),
            budget=parts.budget.status(),
            trimmed=shown.trimmed,
            files_left_out=list(shown.files_left_out),
            grants=list(parts.gate.grants),
            agent=self.model.agent_name,
            agent_stack=[] if swarm is None else list(swarm.stack),
            agents=self.spec.agent_names(),
            move_pending=None if requests.move is None else requests.move.agent,
            finish_reason=latest_finish_reason(messages),
            waiting_for_capacity=shown.waiting_for_capacity,
            upgrade=self.spec.session.upgrade,
            move_requested=state.move_to_current,
            wake_ups=list(state.wake_ups.pending),
        )

    def refusal(self, event: Checked) -> str | None:
        """Why the Session would refuse ``event`` (an update's validator asks before it
        is sent), without changing anything."""
        parts = self._parts
        match event:
            case MessageArrived():
                return parts.requests.message_problem(event.message)
            case Injected():
                return parts.requests.inject_problem(event.message)
            case DecisionArrived():
                return parts.decisions.decision_problem(event.signal, event.decision)
            case WakeUpSet():
                checked = parts.wake_ups.check(event.request, event.asked)
                return checked if isinstance(checked, str) else None
            case WakeUpCancelled():
                return parts.wake_ups.cancel_problem(event.wake_up_id)
            case _:
                return parts.decisions.revoke_problem(event.signal)

    # --- when the loop acts -----------------------------------------------------------

    def continue_as_new_due(self, suggested: bool) -> bool:
        """``suggested``: the run's history is long (the server says so, or the spec's
        event limit is reached). Only a run that did some work hands over, and not while
        queued messages are too big to carry (they join the array at the boundary)."""
        if not (self._marks.progressed and suggested):
            return False
        if self._parts.batch.decided:
            return False  # its decisions live in the batch now: it runs first
        return self._inbox_carries()

    def move_due(self, changed: bool) -> bool:
        """``changed``: the workers' owner made another build current. The session goes to
        it now if its agent upgrades on its own or a person asked, and only at a turn
        boundary (no tool batch open: its calls finish on the build that started them)."""
        if not changed or self._state.stage == "tools":
            return False
        if self.spec.session.upgrade != "auto" and not self._state.move_to_current:
            return False
        return self._inbox_carries()

    def _inbox_carries(self) -> bool:
        """Queued messages are small enough to carry (else they join the array first)."""
        queued = sum(len(text_of(m.content)) for m in self._parts.requests.inbox)
        return queued <= INBOX_CARRY_CHARS

    def _interrupted(self, suggested: bool) -> bool:
        """A wait must end early: the session is ending, the turn is cancelled, or a
        continue-as-new is due."""
        return (
            self._parts.requests.ending is not None
            or self._state.cancel is not None
            or self.continue_as_new_due(suggested)
        )

    def idle_wait_over(self, suggested: bool, changed: bool = False) -> bool:
        """Waiting for a message ends: one arrived, a flush is due, a move to the current
        build is due, or as ``_interrupted``."""
        waiting = self._parts.requests.waiting() or self._parts.decisions.unverified
        waiting = waiting or self._parts.wake_ups.changed  # the wait is measured again
        return waiting or self._interrupted(suggested) or self.move_due(changed)

    def approvals_wait_over(self, ids: list[str], suggested: bool) -> bool:
        """Waiting for decisions on ``ids`` ends: all are decided, or the loop must act
        first (check a token, tell a second group, let a grant approve its next page, or
        as ``_interrupted``)."""
        return (
            self._parts.approvals.all_decided(ids)
            or self._parts.decisions.work_waiting()
            or self._interrupted(suggested)
        )
