"""The session as a pure state machine: every rule of the turn loop, without Temporal.

A ``Session`` owns one ``SessionState`` (the very object continue-as-new carries) and
the message array inside it. Everything reaches it through its methods: events (a
message arrived, the model replied or failed, tools finished, people decided, a wait
ended), ``next_command`` (what to do next: call the model, pause, check or await
approvals, run tool groups, wait for a message, continue as new, or finish), and views
(its status, its pending approvals). The executor (``carry_out``) carries commands out
through an ``Effects`` of the caller's: the workflow's Temporal primitives, or, in a
test, functions in the same process.

The work of deciding is shared with parts that each keep one part of the rules: the
tool batch (slots, the gate, run groups, results), people's decisions, approvals as
data, budgets, rescue of unusable replies, the swarm, what people send. Each part owns
its slice of the state (``SessionState.approvals``, ``.budget``, ...) and reads the
others' only through their methods; the Session keeps the loop's own fields. The parts
are the Session's own: nothing outside it reaches them.

No I/O, no clock (times are given), no randomness: deterministic by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from durable_agent._contracts._approval_contracts import (
    ApprovalPolicyView,
    ApprovalSignal,
    ChildApprovals,
    DecisionResult,
    Grant,
    PendingApproval,
    RevokeGrantSignal,
    TokenVerdict,
)
from durable_agent._contracts._contracts import (
    AgentResult,
    BudgetSignal,
    CancelTurnSignal,
    EndSessionSignal,
    FlushSignal,
    GuardrailVerdict,
    ModelSetup,
    ModelSpend,
    MoveToAgentSignal,
    Phase,
    ResolvedTool,
    ResolveToolsResult,
    SessionStatus,
)
from durable_agent._spec._spec import AgentInput, AgentSpec, ModelPrice, ModelSpec
from durable_agent._spec._structured_output import parse_structured_output
from durable_agent._wire._context import WindowMarks
from durable_agent._wire._messages import (
    ApprovalDecision,
    AssistantMessage,
    RecordedDecision,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
    text_of,
)
from durable_agent._wire._model_inputs import ModelInputs
from durable_agent._wire._request_messages import prepare_request_messages
from durable_agent._wire._transcript import Transcript, root_of

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
from ._loop_rules import epoch_ms, last_reply, latest_finish_reason, stage_after
from ._model_step import ModelStep
from ._opening import instructions_message, open_conversation
from ._requests import Requests
from ._rescue import Rescue, truncated_reason, unusable_reason
from ._state import SessionState
from ._swarm import Swarm
from ._sweeps import StandingGrants
from ._tool_results import cancel_text, guardrail_text, not_completed
from ._toolbox import Toolbox

INBOX_CARRY_CHARS = 500_000
"""Queued messages continue-as-new may carry inline; more wait for the turn boundary."""
#: Waiting calls ``status`` lists at most: a batch of thousands would pass the 2 MB a
#: query's answer may carry (``SessionHandle.pending_approvals`` reads all, in pages).
STATUS_PENDING_SHOWN = 1000

Reply = AssistantMessage | ToolMessage
Purpose = Literal["reply", "summary"]


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Compatibility:
    """Where this run meets a path the previous release asked on its own (its runs
    recorded a marker there): the workflow consumes that marker, so that their
    histories replay (``workflows/patches.py``, ``retired``). By default nothing is
    asked: what a session in a test, or inline, follows."""

    approvals_in_pages: Callable[[], object] = lambda: None
    """A batch of thousands judged, asked and announced one page per workflow task."""


@dataclass(frozen=True)
class ModelFailure:
    """A model call that failed: its failure type, its words, and when to try again."""

    kind: str | None
    text: str
    retry_after: timedelta | None = None


@dataclass(frozen=True)
class ModelCancelled:
    """A model call (or summary) ``cancel_turn`` stopped."""


ModelOutcome = AssistantMessage | ModelFailure | ModelCancelled


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
        self._compat = compat
        self.messages = Transcript.adopt(
            state.messages, root_of(state.chain), ids=state.message_ids
        )
        """The array (read it; only the Session writes it)."""
        self._window_marks = WindowMarks()
        """Where requests start, kept up as the array grows (``status`` reads it)."""
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
        self._rescue = Rescue(spec, state.rescue, self.messages)
        self._step = ModelStep(self.messages)
        self.phase: Phase = "starting"
        self._progressed = False
        """This run has done work: continue-as-new may follow."""
        self._reply: Reply | None = None
        self.reply_reason = "final_answer"
        """Why the latest turn ended (the live feed tells it)."""
        self._structured: Any = None
        self._outcome: Finish | None = None
        self._checking: UserMessage | None = None
        """A user message its input guardrails are checking (not in the array yet)."""
        self._held: AssistantMessage | None = None
        """A final answer its output guardrails are checking (not in the array yet)."""
        self._turn_failed: str | None = None
        """Why the latest turn ended without an answer (guardrail, cancellation)."""
        self.trimmed = 0
        """Messages the latest request left out to fit the context budget."""
        self._waiting_for_capacity: str | None = None
        """The limited endpoint the model call waits for capacity on (``status`` shows it)."""
        self._capacity_ready = False
        """The endpoint's limiter said capacity is kept for the waiting call."""
        self._checked_reply: AssistantMessage | None = None
        """A reply whose calls' arguments its worker found to be JSON objects."""

    # --- what the Session shows --------------------------------------------------------

    @property
    def tools(self) -> dict[str, ResolvedTool]:
        """The tools every agent has (a one-agent session's tools)."""
        return self._toolbox.tools

    @property
    def active_tools(self) -> dict[str, ResolvedTool]:
        """The tools of the agent answering now."""
        return self._toolbox.active

    @property
    def model_spec(self) -> ModelSpec:
        """The model the step calls now: the answering agent's, or a fallback of it."""
        base = self._base_model
        return base if self._step.hop == 0 else base.fallbacks[self._step.hop - 1]

    @property
    def price(self) -> ModelPrice | None:
        """What the model the step calls costs (the spec's price, else the worker's)."""
        return self._budget.price_of(self.model_spec)

    @property
    def _base_model(self) -> ModelSpec:
        """The model of the agent answering now (its fallbacks in ``fallbacks``)."""
        return self.spec.model if self._swarm is None else self._swarm.model

    @property
    def agent_name(self) -> str | None:
        """The active agent of a swarm (``None`` in a one-agent session)."""
        return None if self._swarm is None else self._swarm.active

    @property
    def turn(self) -> int:
        return self._state.turn

    @property
    def usage(self) -> Usage:
        return self._budget.usage

    @property
    def runs(self) -> int:
        """Runs of this session so far (1 + continue-as-new cycles)."""
        return self._state.runs

    @property
    def chain(self) -> Literal[2] | None:
        """The transcript chain the session's messages are stored in."""
        return self._state.chain

    @property
    def reply_id(self) -> str | None:
        """The stable id the model's reply takes when it joins the array (``None``: this
        session gives no ids); the worker that makes the reply is told it."""
        return self.messages.next_id()

    def result_id(self, slot: int) -> str | None:
        """The stable id the open batch's result in ``slot`` takes: the results join
        right after the message that asked for them, in slot order."""
        return self.messages.next_id(slot)

    @property
    def queued(self) -> int:
        """Messages waiting for the next turn boundary."""
        return len(self._requests.inbox)

    @property
    def batch_open(self) -> bool:
        """A tool batch is open: its calls wait for people or run."""
        return self._state.stage == "tools"

    @property
    def cancelling(self) -> bool:
        """A ``cancel_turn`` waits for the next checkpoint."""
        return self._state.cancel is not None

    @property
    def ending(self) -> bool:
        """Someone asked the session to end."""
        return self._requests.ending is not None

    @property
    def move_to_current(self) -> bool:
        """A person asked this (pinned) session to go to the current build."""
        return self._state.move_to_current

    @move_to_current.setter
    def move_to_current(self, asked: bool) -> None:
        self._state.move_to_current = asked

    @property
    def takes_page(self) -> Callable[[int], int]:
        """How many of ``count`` approvals' worth of work one workflow task does."""
        return self._approvals.page_for

    @property
    def waiting_for_capacity(self) -> str | None:
        return self._waiting_for_capacity

    @property
    def capacity_ready(self) -> bool:
        return self._capacity_ready

    def model_setup(self, purpose: Purpose = "reply") -> ModelSetup:
        """What the active agent's model calls share (sent once, then by digest): its
        model, options and tools; for a swarm, also its name and prompt."""
        model, swarm = self.model_spec, self._swarm
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
        spec = self.spec
        return ModelSetup(
            endpoint=model.endpoint,
            model=model.name,
            options=model.options,
            reasoning=model.reasoning,
            stream=model.stream,
            output_schema=spec.output_schema,
            tools=[t.definition for t in self.active_tools.values()],
            context=self._step.shortened_context
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
        step = self._step
        return f"{purpose}:{self.agent_name or ''}:{step.hop}:{step.shortenings}"

    def status(self) -> SessionStatus:
        state, messages, marks = self._state, self.messages, self._window_marks
        pending = self._decisions.pending_approvals()
        return SessionStatus(
            phase=self.phase,
            turn=state.turn,
            message_count=len(messages),
            pending_approvals=pending[:STATUS_PENDING_SHOWN],
            pending_count=len(pending),
            usage=self._budget.usage,
            spend=dict(self._budget.spend),
            last_error=state.last_error,
            rejected_signals=list(self._requests.rejected_signals),
            queued_messages=len(self._requests.inbox),
            runs=state.runs,
            cancel_pending=state.cancel is not None,
            flushes_pending=self._requests.flushes_waiting(),
            compacted=marks.counted(messages, marks.window(messages)[0]),
            budget=self._budget.status(),
            trimmed=self.trimmed,
            grants=list(self._gate.grants),
            agent=self.agent_name,
            agent_stack=[] if self._swarm is None else list(self._swarm.stack),
            agents=self.spec.agent_names(),
            move_pending=None if self._requests.move is None else self._requests.move.agent,
            finish_reason=latest_finish_reason(messages),
            waiting_for_capacity=self._waiting_for_capacity,
            upgrade=self.spec.session.upgrade,
            move_requested=state.move_to_current,
        )

    def pending_approvals(self) -> list[PendingApproval]:
        """Undecided approvals: this session's, then its sub-agents' (their ids prefixed
        with the child's call, decided through this session)."""
        return self._decisions.pending_approvals()

    def undecided(self) -> list[PendingApproval]:
        """This session's own undecided approvals (what a sub-agent tells its parent)."""
        return self._approvals.undecided()

    def asked(self) -> list[PendingApproval]:
        """Every approval asked and not yet taken into its batch, decided or not."""
        return self._approvals.asked()

    def decided(self) -> Mapping[str, Any]:
        """The decisions recorded and not yet taken into their batch, by approval id."""
        return self._approvals.decided()

    def approvals_by_id(self) -> Mapping[str, PendingApproval]:
        return self._approvals.find_all()

    def newly_decided(self) -> list[str]:
        """Ids decided since they were last taken from this list (in order): the live
        feed takes them as it announces them."""
        return self._approvals.newly_decided

    def approval_policy(self) -> ApprovalPolicyView:
        """How the gate decides: the spec's settings, each tool's own approvers, grants."""
        approvers = {
            name: tool.policy.approvers
            for name, tool in self.active_tools.items()
            if tool.policy.approvers is not None
        }
        return ApprovalPolicyView(
            settings=self.spec.approvals, tool_approvers=approvers, grants=self._gate.grants
        )

    def grants(self) -> list[Grant]:
        return self._gate.grants

    def spend(self) -> dict[str, ModelSpend]:
        return self._budget.spend

    def for_next_run(self) -> SessionState:
        """The state a fresh run continues from (the array inline; the workflow swaps it
        for a reference when it does not fit one payload)."""
        return self._state.model_copy(update={"runs": self._state.runs + 1, "transcript": None})

    def timeout_decision(self, pending: PendingApproval) -> ApprovalDecision:
        """What a deadline decides for a call: its tool's default."""
        return self._batch.timeout_decision(pending)

    def child_started(self, child_id: str) -> None:
        """A sub-agent call of the open batch runs as the child session ``child_id``: its
        reports of approvals are taken from now on."""
        self._batch.children.add(child_id)

    def forwards_waiting(self, child_id: str) -> bool:
        """Decisions made through this session wait to be passed on to the child."""
        return self._decisions.forwards_waiting(child_id)

    def take_forwards(self, child_id: str) -> list[tuple[str, ApprovalSignal]]:
        """The decisions to pass on to the child (the signal's name and argument), in the
        order they were made; they are the caller's to send from now on."""
        return self._decisions.take_forwards(child_id)

    # --- opening a run ------------------------------------------------------------------

    def start(self, request: AgentInput, now: datetime) -> None:
        """The conversation of a fresh session: instructions, given history, first message."""
        checked_first = open_conversation(self.spec, self.messages, request, self._first(), now)
        if checked_first is not None:
            self._requests.queue(checked_first)
        self._state.stage = stage_after(self.messages)

    def opening_message(self, now: datetime) -> SystemMessage | None:
        """The system message ``start`` opens an empty conversation with."""
        return instructions_message(self.spec, self._first(), now)

    def _first(self) -> tuple[str | None, str | None]:
        """The name and instructions of the agent that opens (``None, None``: one agent)."""
        swarm = self._swarm
        return (None, None) if swarm is None else (swarm.active, swarm.agent.instructions)

    def admitted(self, prices: dict[str, ModelPrice]) -> None:
        """The worker admitted the spec: the prices it has for the models the spec names
        without one."""
        self._budget.prices = prices

    def tools_resolved(self, result: ResolveToolsResult) -> str | None:
        """The tools as the workers described them; why the session cannot start, if it
        cannot."""
        return self._toolbox.resolved(result)

    def tools_added(self, tools: list[ResolvedTool]) -> str | None:
        """Tools from MCP servers, OpenAPI documents or toolsets; why the session cannot
        start, if it cannot."""
        return self._toolbox.added(tools)

    def sub_agents_added(self) -> str | None:
        """The spec's sub-agents as tools (each call a child session)."""
        return self._toolbox.added(self._toolbox.sub_agents())

    def tool_names_to_resolve(self) -> list[str]:
        """The function tools the workers describe at start (a swarm's agents' too)."""
        names = [t.name for t in self.spec.tools]
        if self._swarm is not None:
            names = list(dict.fromkeys([*names, *self._swarm.tool_names()]))
        return names

    # --- what people send -----------------------------------------------------------------

    def rejected(self, text: str) -> str:
        """Keep a refusal that changed nothing visible in ``status``; its text."""
        return self._requests.reject(text)

    def message_arrived(self, message: UserMessage, now: datetime) -> str | None:
        """Queue a user message for the next turn boundary; why it was rejected, if it was."""
        return self._requests.message_arrived(message, now)

    def message_problem(self, message: UserMessage) -> str | None:
        """Why a message would be refused (an update's validator, a query, asks too)."""
        return self._requests.message_problem(message)

    def inject_arrived(
        self, message: SystemMessage | AssistantMessage, now: datetime
    ) -> str | None:
        return self._requests.inject_arrived(message, now)

    def inject_problem(self, message: SystemMessage | AssistantMessage) -> str | None:
        return self._requests.inject_problem(message)

    def end_requested(self, request: EndSessionSignal) -> None:
        self._requests.end_requested(request)

    def flush_requested(self, request: FlushSignal) -> None:
        self._requests.flush_requested(request)

    def budget_changed(self, request: BudgetSignal) -> str | None:
        return self._requests.budget_changed(request)

    def move_requested(self, request: MoveToAgentSignal) -> str | None:
        return self._requests.move_requested(request)

    def cancel_requested(self, request: CancelTurnSignal) -> str | None:
        """Stop the current turn at its next checkpoint; why not, if there is no turn."""
        state = self._state
        running = state.stage != "idle" or self._checking is not None or self._held is not None
        if not running and not self._requests.inbox and self.phase != "starting":
            return self._requests.reject("cancel_turn: no turn is running")
        if state.cancel is None:
            state.cancel = request
        return None

    def decision_arrived(
        self,
        signal: ApprovalSignal,
        decision: RecordedDecision,
        now: datetime,
        key: str | None = None,
    ) -> str | None:
        """A person's decision (``key``: the update that sent it, whose caller waits for
        ``decision_outcome``); why it changed nothing, if it did not."""
        return self._decisions.decision_arrived(signal, decision, now, key=key)

    def decision_problem(self, signal: ApprovalSignal, decision: RecordedDecision) -> str | None:
        """Why a decision would change nothing (the ``decide`` update's validator asks)."""
        return self._decisions.decision_problem(signal, decision)

    def revoke_requested(self, signal: RevokeGrantSignal, key: str | None = None) -> str | None:
        return self._decisions.revoke_requested(signal, key)

    def revoke_problem(self, signal: RevokeGrantSignal) -> str | None:
        return self._decisions.revoke_problem(signal)

    def decision_outcome(self, key: str) -> DecisionResult | str | None:
        """What became of the decision the update ``key`` sent: accepted, or why not
        (``None``: not known yet)."""
        return self._decisions.outcomes.get(key)

    def decision_outcome_told(self, key: str) -> None:
        """The update's caller has its answer: the Session forgets it."""
        self._decisions.outcomes.pop(key, None)

    def child_approvals(self, report: ChildApprovals) -> None:
        """A sub-agent session's undecided approvals, as it reports them."""
        self._decisions.child_approvals(report, self._batch.running_children())

    def capacity_kept(self) -> None:
        """The endpoint's limiter keeps capacity for the waiting model call."""
        self._capacity_ready = True

    # --- waiting ------------------------------------------------------------------------

    def continue_as_new_due(self, suggested: bool) -> bool:
        """``suggested``: the run's history is long (the server says so, or the spec's
        event limit is reached). Only a run that did some work hands over, and not while
        queued messages are too big to carry (they join the array at the boundary)."""
        if not (self._progressed and suggested):
            return False
        if self._batch.decided:
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
        queued = sum(len(text_of(m.content)) for m in self._requests.inbox)
        return queued <= INBOX_CARRY_CHARS

    def continue_as_new_deferred(self) -> None:
        """The state did not fit one payload: go on in this run until more work is done."""
        self._progressed = False

    def interrupted(self, suggested: bool) -> bool:
        """A wait must end early: the session is ending, the turn is cancelled, or a
        continue-as-new is due."""
        return (
            self._requests.ending is not None
            or self._state.cancel is not None
            or self.continue_as_new_due(suggested)
        )

    def idle_wait_over(self, suggested: bool, changed: bool = False) -> bool:
        """Waiting for a message ends: one arrived, a flush is due, a move to the current
        build is due, or as ``interrupted``."""
        waiting = self._requests.waiting() or self._decisions.unverified
        return waiting or self.interrupted(suggested) or self.move_due(changed)

    def approval_wait_over(self, suggested: bool) -> bool:
        """Waiting for decisions ends early (besides ``interrupted``) to check a token,
        tell a second group or let a grant approve its next page."""
        return self._decisions.work_waiting() or self.interrupted(suggested)

    def all_decided(self, ids: list[str]) -> bool:
        return self._approvals.all_decided(ids)

    def next_deadline(self, ids: list[str]) -> datetime | None:
        """The earliest deadline among the undecided ``ids``."""
        return self._approvals.next_deadline(ids)

    def deadlines_passed(self, ids: list[str], now: datetime) -> bool:
        """Decide a page of the calls whose deadline passed with their tool's default (or
        escalate them); whether more passed than a page."""
        return self._approvals.apply_defaults(ids, self._batch.timeout_decision, now)

    def model_call_sent(self) -> None:
        """A model call goes out: a limiter's word from here on (``capacity_kept``) is
        for it, not for one before."""
        self._capacity_ready = False

    def waiting_for_room(self, endpoint: str | None) -> None:
        """The model call waits for capacity on a limited endpoint (``None``: no longer)."""
        self._waiting_for_capacity = endpoint

    def idle_timed_out(self) -> None:
        self._outcome = self._finish("done", "idle_timeout", final=last_reply(self.messages))

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
            self.phase = "checking_guardrails"
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
                self.phase = "checking_guardrails"
                text = text_of(self._checking.content)
                return CheckGuardrails("input", self.spec.guardrails.input, text)
            self._deliver(requests.take_inbox())
        rules = self.spec.session
        if state.stage == "idle" and rules.end_after_reply:
            if self._turn_failed is not None:
                return self._finish("failed", self.reply_reason, error=self._turn_failed)
            if self._reply is not None:
                return self._finish("done", self.reply_reason, final=self._reply)
        upgrade = self.move_due(changed)
        if upgrade or self.continue_as_new_due(suggested):
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
        self.phase = "idle"
        timeout = rules.idle_timeout_seconds
        return WaitForMessage(timedelta(seconds=timeout) if timeout else None)

    def fail(self, text: str) -> AgentResult:
        """End the session as failed (a problem outside the loop's rules, such as a
        message too large for any payload)."""
        return self._finish("failed", "error", error=text).result

    # --- guardrails ----------------------------------------------------------------------

    def guardrails_checked(
        self, verdict: GuardrailVerdict | None, failure: str | None = None
    ) -> None:
        """The verdict on the message or answer being checked (``failure``: the guardrail
        kept failing; the turn fails closed with its words)."""
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
        command = self._step.command(self._state.turn + 1, self.model_spec)
        if isinstance(command, Pause):
            return command
        self._progressed = True
        if isinstance(command, Summarise):
            self.phase = "compacting"
            return command
        self.phase = "calling_model"
        if not self.trimmed_by_workers:
            self.trimmed = self._trimmed_count()
        return command

    @property
    def trimmed_by_workers(self) -> bool:
        """The worker that makes a model call counts what its request left out (a reply
        that comes with its digest brings the count: a session in the version-2 hash
        chain; one opened before keeps counting in the workflow for its life)."""
        return self._state.chain == 2

    def request_trimmed(self, left_out: int) -> None:
        """The worker's count of the messages the latest request left out to fit the
        context budget."""
        self.trimmed = left_out

    def _trimmed_count(self) -> int:
        """Messages the request about to be made leaves out to fit the context budget."""
        rules = self._step.shortened_context or self.model_spec.context
        if rules.budget_tokens is None:
            return 0
        return prepare_request_messages(self.messages, rules).left_out

    def model_answered(self, outcome: ModelOutcome, now: datetime) -> None:
        """The model call's outcome: a reply, a failure, or a cancellation."""
        if isinstance(outcome, AssistantMessage):
            self.model_replied(outcome)
        elif isinstance(outcome, ModelFailure):
            self.model_failed(outcome.kind, outcome.text, outcome.retry_after, now)
        else:
            self._step.stop()

    def summary_answered(self, outcome: ModelOutcome, now: datetime) -> None:
        """The summary call's outcome: the summary, a failure, or a cancellation."""
        if isinstance(outcome, AssistantMessage):
            self.summarised(outcome, now)
        else:
            self.model_answered(outcome, now)

    def reply_read(
        self, reply: AssistantMessage, called: frozenset[str] | None, checked: bool
    ) -> None:
        """What the worker found of a reply before it arrives: the tools it calls (when
        its calls were read a page at a time), and whether every call's arguments are JSON
        objects."""
        if called is not None:
            self._batch.tools_called(reply, called)
        if checked:
            self._checked_reply = reply

    def usage_counted(self, usage: Usage | None) -> None:
        """Tokens a model call spent that no reply brings (the worker's store lost the
        reply, and the model is asked again): billed all the same."""
        self._budget.count(usage, self.price, self.model_spec.name)

    def summarised(self, summary: AssistantMessage, now: datetime) -> None:
        """The summary stands in for earlier messages from now on (they stay)."""
        self._step.summarised(summary, now)
        self._budget.count(summary.usage, self.price, self.model_spec.name)

    def model_replied(self, assistant: AssistantMessage) -> None:
        checked, self._checked_reply = assistant is self._checked_reply, None
        if self._step.hop:  # a fallback answered: the message says which
            assistant = assistant.model_copy(update={"model": self.model_spec.name})
        self._step.calling = False
        state = self._state
        state.turn += 1
        state.model_calls_this_reply += 1
        self._budget.count(assistant.usage, self.price, self.model_spec.name)
        self._budget.count(assistant.voided_usage, self.price, self.model_spec.name)
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
                self.active_tools,
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

    def model_failed(
        self, kind: str | None, text: str, retry_after: timedelta | None, now: datetime
    ) -> None:
        """A model call failed: another attempt after a pause while the model's own
        failures leave attempts, else the turn ends with ``text`` and the session waits
        for the next message (``stop.end_session_on`` ``model_error``: the session fails)."""
        if self._step.retried(kind, retry_after, self.model_spec):
            return
        if self._step.overflowed(kind, text):
            self._step.shorten_request(self.model_spec)
            return
        if self._step.fell_back(kind, len(self._base_model.fallbacks)):
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
                agent_name=self.agent_name,
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

    def model_cancelled(self) -> None:
        """The model call (or summary) was stopped by ``cancel_turn``: nothing joins."""
        self._step.stop()

    # --- a tool batch (decided by ``ToolBatch``) ------------------------------------------

    def _batch_command(self, now: datetime) -> Command:
        last = self.messages[-1]
        assert isinstance(last, AssistantMessage) and last.tool_calls
        command = self._batch.next_command(last, self._state.turn, now)
        # (a batch's pages are described and asked each in a workflow task of its own)
        if isinstance(command, DescribeCalls | AwaitApprovals | Pause):
            self.phase = "awaiting_approval"
        elif isinstance(command, RunTools):
            self._progressed = True
            self.phase = "running_tools"
        return command

    def approvals_checked(self, verdicts: list[bool]) -> None:
        """The workers' predicates' answers for the batch's page."""
        self._batch.approvals_checked(verdicts)

    def calls_described(self, descriptions: list[str]) -> None:
        """The tools' own readable forms of the page's calls waiting for people."""
        self._batch.calls_described(descriptions)

    def tokens_checked(self, verdicts: list[TokenVerdict], now: datetime) -> None:
        """The workers' word on each signed decision."""
        self._decisions.tokens_checked(verdicts, now)

    def escalation_sent(self) -> None:
        self._decisions.escalation_sent()

    def approvals_waited(self, now: datetime) -> None:
        """The wait for the batch's approvals ended (see ``ToolBatch.approvals_waited``)."""
        self._batch.approvals_waited(now)

    def tool_arrived(self, slot: int, result: ToolMessage) -> None:
        """A call's result, as it arrives: placed in its slot."""
        self._batch.arrived(slot, result)

    def tools_finished(self, results: dict[int, ToolMessage], now: datetime) -> None:
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
            self._budget.count(result.usage, self.price, f"tool {result.tool_name}")
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
            messages = [m.model_copy(update={"agent_name": self.agent_name}) for m in messages]
        self.messages.join_all(messages)
        state = self._state
        if state.stage == "idle":
            state.model_calls_this_reply = 0
            self._rescue.new_reply()
        state.stage = "model"
        self.phase = "calling_model"  # busy from here (a continue-as-new may come first)
        self._reply, self._turn_failed = None, None

    def _end_turn(self, reason: str, error: str) -> None:
        """The turn is over without an answer (a guardrail, a cancellation)."""
        self._state.stage = "idle"
        self._reply, self.reply_reason = None, reason
        self._state.last_error = self._turn_failed = error

    @property
    def turn_failure(self) -> str | None:
        """Why the latest turn ended without an answer (``None``: it did not)."""
        return self._turn_failed

    def _replied(self, reply: Reply, reason: str) -> None:
        """The model's answer to the latest message is complete: the session goes idle."""
        self._state.stage = "idle"
        self._reply, self.reply_reason = reply, reason
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
            self.tools_finished({}, now)
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
        self.phase = status
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
