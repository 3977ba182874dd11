"""The session as a pure state machine: every rule of the turn loop, without Temporal.

A ``Session`` owns one ``SessionState`` (the very object continue-as-new carries) and
the message array inside it. It takes events (a message arrived, the model replied
or failed, tools finished, approvals were decided or their wait ended, the end was
requested) as method calls, and ``next_command`` says what to do next: call the
model, pause, check or await approvals, run tool groups, wait for a message,
continue as new, or finish. The workflow only carries commands out and reports back,
so the loop runs in milliseconds in a test, with no server.

No I/O, no clock (times are given), no randomness: deterministic by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from durable_agent.approval_policy import describe_arguments
from durable_agent.context import compaction_until, summary_message, window_start
from durable_agent.contracts import (
    MODEL_ATTEMPT_FAILED,
    AgentResult,
    BudgetSignal,
    BudgetStatus,
    CancelTurnSignal,
    DecisionResult,
    EndSessionSignal,
    FlushSignal,
    GuardrailVerdict,
    Handoff,
    HttpCall,
    McpCall,
    ModelSetup,
    MoveToAgentSignal,
    PendingApproval,
    Phase,
    ResolvedTool,
    ResolveToolsResult,
    SessionStatus,
)
from durable_agent.messages import (
    ApprovalDecision,
    ApprovalRecord,
    AssistantMessage,
    FlushMessage,
    ResqueMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    text_of,
)
from durable_agent.request_messages import prepare_request_messages
from durable_agent.secrets import references
from durable_agent.spec import AgentInput, AgentSpec, ModelSpec
from durable_agent.structured_output import parse_structured_output
from durable_agent.tool_definition import ToolDefinition
from durable_agent.tools import ToolPolicy
from durable_agent.transcript import Transcript
from durable_agent.workflows.approvals import Approvals
from durable_agent.workflows.commands import (
    AwaitApprovals,
    CallModel,
    CheckApprovals,
    CheckGuardrails,
    Command,
    ContinueAsNew,
    DescribeCalls,
    Finish,
    NotifyEscalation,
    Pause,
    RunTools,
    Summarise,
    ToolRun,
    VerifyTokens,
    WaitForMessage,
)
from durable_agent.workflows.decisions import Decisions
from durable_agent.workflows.gate import (
    Gate,
    Question,
    Verdicts,
)
from durable_agent.workflows.rescue import corrective_text, not_run_results, unusable_reason
from durable_agent.workflows.state import SessionState
from durable_agent.workflows.swarm import Swarm
from durable_agent.workflows.turn_logic import (
    apply_overrides,
    approval_id,
    backoff,
    cancel_text,
    cancelled_result,
    denial_result,
    error_result,
    execution_groups,
    guardrail_denial,
    over_call_limit,
    stage_after,
)

MAX_REJECTED_SIGNALS_KEPT = 50
INBOX_CARRY_CHARS = 500_000
"""Queued messages continue-as-new may carry inline; more wait for the turn boundary."""


Reply = AssistantMessage | ToolMessage
Purpose = Literal["reply", "summary"]


@dataclass
class _Batch:
    """The open tool batch (the last assistant message's calls), as this run decides it.
    Not carried: a new run decides it again (approvals already asked keep their ids,
    deadlines and decisions, which the state carries)."""

    calls: list[ToolCall]
    slots: list[ToolMessage | None]
    questions: list[Question]
    """What predicates must answer before the gate can decide (asked once)."""
    needs_person: list[int]
    checked: bool
    approvals: dict[int, ApprovalRecord] = field(default_factory=dict)
    rules: dict[int, str] = field(default_factory=dict)
    """The rule that asked for a person, by slot."""
    descriptions: dict[int, str] | None = None
    """Readable forms of the calls that wait, once described."""
    asked: dict[str, int] | None = None
    """Approval id -> slot, once the approvals were opened."""
    decided: bool = False
    handoff: Handoff | None = None
    """Where the batch hands the conversation (a swarm), once its results are in."""


class Session(Decisions):
    def __init__(self, spec: AgentSpec, state: SessionState) -> None:
        self.spec = spec
        self.state = state
        self.messages = Transcript.adopt(state.messages)
        self.approvals = Approvals(state, spec.approvals.escalation)
        self.tools: dict[str, ResolvedTool] = {t.definition.name: t for t in state.tools}
        """The tools every agent has (a one-agent session's tools)."""
        self.swarm = Swarm(spec, spec.swarm, state) if spec.swarm is not None else None
        self.gate = Gate(spec.approvals, state)
        self.outcomes: dict[str, DecisionResult | str] = {}
        """What became of each ``decide`` update (by update id): accepted, or why not."""
        self.phase: Phase = "starting"
        self.progressed = False
        """This run has done work: continue-as-new may follow."""
        self.reply: Reply | None = None
        self.reply_reason = "final_answer"
        self.structured: Any = None
        self._batch: _Batch | None = None
        self._calling = False  # a model call and its retries are one step
        self._model_failures = 0
        self._pause: timedelta | None = None
        self._outcome: Finish | None = None
        self._summarising: int | None = None
        """Compaction in progress: the summary is to stand in for this many messages."""
        self._checking: UserMessage | None = None
        """A user message its input guardrails are checking (not in the array yet)."""
        self._held: AssistantMessage | None = None
        """A final answer its output guardrails are checking (not in the array yet)."""
        self._turn_failed: str | None = None
        """Why the latest turn ended without an answer (guardrail, cancellation)."""
        self.trimmed = 0
        """Messages the latest request left out to fit the context budget."""
        self.rescue_enabled = True
        """Rescue unusable model turns (off only to replay histories from before it)."""

    # --- starting ----------------------------------------------------------------------

    def tools_resolved(self, result: ResolveToolsResult) -> str | None:
        """Record the tools as workers described them; why the session cannot start, if
        it cannot."""
        if result.missing:
            return "spec.tools names tools that no worker has loaded: " + ", ".join(result.missing)
        if result.missing_guardrails:
            lacking = ", ".join(result.missing_guardrails)
            return f"spec.guardrails names guardrails that no worker has loaded: {lacking}"
        if result.missing_hooks:
            lacking = ", ".join(result.missing_hooks)
            return f"spec.approvals names predicates or notifiers no worker has loaded: {lacking}"
        self.tools = apply_overrides(self.spec.tools, self.spec.tool_execution, result.tools)
        self.state.tools = list(self.tools.values())
        if self.swarm is not None:
            self.swarm.own_tools_resolved(result.tools)
        return None

    @property
    def active_tools(self) -> dict[str, ResolvedTool]:
        """The tools of the agent answering now."""
        return self.tools if self.swarm is None else self.swarm.tools(self.tools)

    @property
    def model_spec(self) -> ModelSpec:
        """The model of the agent answering now."""
        return self.spec.model if self.swarm is None else self.swarm.model

    @property
    def agent_name(self) -> str | None:
        """The active agent of a swarm (``None`` in a one-agent session)."""
        return None if self.swarm is None else self.swarm.active

    def more_tools_added(self, tools: list[ResolvedTool]) -> str | None:
        """Add tools from MCP servers, OpenAPI documents or sub-agents; why the session
        cannot start, if it cannot."""
        taken = set(self.tools)
        if self.swarm is not None:
            taken |= self.swarm.handoff_names()
            taken |= {t.definition.name for own in self.state.agent_tools.values() for t in own}
        clash = sorted({t.definition.name for t in tools} & taken)
        names = [t.definition.name for t in tools]
        clash += sorted({n for n in names if names.count(n) > 1})
        if clash:
            return (
                f"two tools are named {clash[0]!r}: set a prefix on the MCP server or "
                "OpenAPI document, or rename one"
            )
        self.tools.update({t.definition.name: t for t in tools})
        self.state.tools = list(self.tools.values())
        return None

    def sub_agents_added(self) -> str | None:
        """The spec's sub-agents as tools (each call a child session)."""
        task = {
            "type": "object",
            "properties": {"task": {"type": "string", "description": "What the agent is to do"}},
            "required": ["task"],
        }
        tools = [
            ResolvedTool(
                definition=ToolDefinition(
                    name=agent.name, description=agent.description, parameters=task
                ),
                policy=ToolPolicy(approval=agent.approval, max_attempts=1),
                agent=agent.name,
            )
            for agent in self.spec.agents
        ]
        return self.more_tools_added(tools)

    def start(self, request: AgentInput, now_ms: int) -> None:
        """The conversation of a fresh session: instructions, given history, first message."""
        instructions = self.spec.instructions
        if self.swarm is not None:
            instructions = self.swarm.agent.instructions
        if instructions:
            self.messages.append(
                SystemMessage(content=instructions, timestamp=now_ms, agent_name=self.agent_name)
            )
        history = list(request.history)
        first = request.message
        if isinstance(first, str):
            first = UserMessage(content=first)
        if first is not None:
            first = first.model_copy(update={"timestamp": now_ms, "agent_name": self.agent_name})
        guarded = bool(self.spec.guardrails.input)
        last = history[-1] if history else None
        if guarded and first is None and isinstance(last, UserMessage):
            history.pop()  # the message that starts the turn is checked first
            first = last
        self.messages.extend(history)
        if first is not None and guarded:
            self.state.inbox.append(first)
        elif first is not None:
            self.messages.append(first)
        self.state.stage = stage_after(self.messages)

    # --- what people send (signals record only) ------------------------------------------

    def message_arrived(self, message: UserMessage, now_ms: int) -> str | None:
        """Queue a user message for the next turn boundary; why it was rejected, if it was."""
        problem = self.message_problem(message)
        if problem is not None:
            return self.reject(problem)
        self.state.inbox.append(message.model_copy(update={"timestamp": now_ms}))
        return None

    def message_problem(self, message: UserMessage) -> str | None:
        """Why a message cannot be queued (the update's validator asks too)."""
        size = len(message.content) if isinstance(message.content, str) else None
        limit = self.spec.session.max_message_chars
        if message.content in ("", []):
            return "send_message: empty message"
        if size is not None and size > limit:
            return f"send_message: {size} characters is over the limit of {limit}"
        if self.state.ending is not None:
            return "send_message: the session is ending"
        return None

    def move_requested(self, request: MoveToAgentSignal) -> str | None:
        """A person moves a swarm session to another agent (at the next safe point)."""
        if self.swarm is None:
            return self.reject("move_to_agent: this session has one agent")
        rejection = self.swarm.move_rejection(request)
        if rejection is not None:
            return self.reject(rejection)
        self.state.move = request
        return None

    def _apply_move(self) -> None:
        """Between turns or model calls (never in a tool batch or a model call)."""
        state = self.state
        assert self.swarm is not None and state.move is not None
        if state.move.agent != self.swarm.active:
            self.swarm.go_to(state.move.agent)
        state.move = None

    def end_requested(self, request: EndSessionSignal) -> None:
        if self.state.ending is None:
            self.state.ending = request

    def cancel_requested(self, request: CancelTurnSignal) -> str | None:
        """Stop the current turn at its next safe point; why not, if there is no turn."""
        state = self.state
        running = state.stage != "idle" or self._checking is not None or self._held is not None
        if not running and not state.inbox and self.phase != "starting":
            return self.reject("cancel_turn: no turn is running")
        if state.cancel is None:
            state.cancel = request
        return None

    def flush_requested(self, request: FlushSignal) -> None:
        """A flush marker joins the array once the current turn is over."""
        self.state.flushes.append(request)

    def budget_changed(self, request: BudgetSignal) -> str | None:
        if request.max_total_tokens is None and request.max_cost_usd is None:
            return self.reject("set_budget: no limit given")
        if request.max_cost_usd is not None and self.spec.model.price is None:
            return self.reject("set_budget: max_cost_usd needs model.price in the spec")
        old = self.state.budget or BudgetSignal()
        self.state.budget = BudgetSignal(
            max_total_tokens=request.max_total_tokens or old.max_total_tokens,
            max_cost_usd=request.max_cost_usd or old.max_cost_usd,
        )
        return None

    def reject(self, text: str) -> str:
        """Keep a signal that changed nothing visible in ``status``; returns the text."""
        self.state.rejected_signals = [*self.state.rejected_signals, text][
            -MAX_REJECTED_SIGNALS_KEPT:
        ]
        return text

    # --- deciding ------------------------------------------------------------------------

    def continue_as_new_due(self, suggested: bool) -> bool:
        """``suggested``: the run's history is long (the server says so, or the spec's
        event limit is reached). Only a run that did some work hands over, and not while
        queued messages are too big to carry (they join the array at the boundary)."""
        if not (self.progressed and suggested):
            return False
        if self._batch is not None and self._batch.decided:
            return False  # its decisions live in the batch now: it runs first
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

    def idle_wait_over(self, suggested: bool) -> bool:
        """Waiting for a message ends: one arrived, a flush is due, or as ``interrupted``."""
        state = self.state
        waiting = state.inbox or state.flushes or state.move or state.unverified
        return bool(waiting) or self.interrupted(suggested)

    def next_command(self, *, suggested: bool, now: datetime) -> Command:
        """What the workflow does next. ``suggested``: see ``continue_as_new_due``."""
        state = self.state
        if self._outcome is not None:
            return self._outcome
        if state.cancel is not None and self._calling:
            self._calling, self._pause, self._summarising = False, None, None
        if self._calling:
            return self._model_command()
        if self._held is not None:
            self.phase = "checking_guardrails"
            return CheckGuardrails("output", self.spec.guardrails.output, self._held.content)
        if state.unverified:
            return VerifyTokens(self.tokens_to_check())
        notice = self.escalations()
        if notice is not None:
            return NotifyEscalation(notice)
        if state.ending is not None and state.stage != "tools":
            return self._finish("done", "ended", final=self._last_reply())
        if state.cancel is not None:
            self._apply_cancel(now)
        if state.stage == "idle" and state.flushes:
            self._apply_flushes(now)
        if state.move is not None and state.stage != "tools":
            self._apply_move()
        if state.stage != "tools" and state.inbox:
            if self.spec.guardrails.input:
                self._checking = state.inbox.pop(0)
                self.phase = "checking_guardrails"
                text = text_of(self._checking.content)
                return CheckGuardrails("input", self.spec.guardrails.input, text)
            self._deliver(list(state.inbox))
            state.inbox.clear()
        rules = self.spec.session
        if state.stage == "idle" and rules.end_after_reply:
            if self._turn_failed is not None:
                return self._finish("failed", self.reply_reason, error=self._turn_failed)
            if self.reply is not None:
                return self._finish("done", self.reply_reason, final=self.reply)
        if self.continue_as_new_due(suggested):
            return ContinueAsNew()
        if state.stage == "model":
            if state.model_calls_this_reply >= self.spec.stop.max_turns:
                text = f"Agent loop exceeded {self.spec.stop.max_turns} iterations"
                return self._finish("failed", "max_turns", error=text)
            spent = self._budget_spent()
            if spent is not None:
                return self._finish("done", "budget", final=self._last_reply(), error=spent)
            self._calling, self._model_failures = True, 0
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

    def idle_timed_out(self) -> None:
        self._outcome = self._finish("done", "idle_timeout", final=self._last_reply())

    def _deliver(self, messages: list[UserMessage]) -> None:
        """Queued messages join the array and start (or steer) a turn."""
        if self.swarm is not None:  # addressed to the agent answering
            messages = [m.model_copy(update={"agent_name": self.agent_name}) for m in messages]
        self.messages.extend(messages)
        if self.state.stage == "idle":
            self.state.model_calls_this_reply = 0
            self.state.rescues_this_reply = 0
        self.state.stage = "model"
        self.phase = "calling_model"  # busy from here (a continue-as-new may come first)
        self.reply, self._turn_failed = None, None

    def _end_turn(self, reason: str, error: str) -> None:
        """The turn is over without an answer (a guardrail, a cancellation)."""
        self.state.stage = "idle"
        self.reply, self.reply_reason = None, reason
        self.state.last_error = self._turn_failed = error

    # --- guardrails, cancellation, flushes, budgets ----------------------------------------

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
                self.messages.append(answer)
                self._replied(answer, "final_answer")
                return
            self.messages.append(answer.model_copy(update={"blocked": reason}))
            self._end_turn("guardrail", self._guardrail_text("output", verdict, reason))
            return
        message, self._checking = self._checking, None
        assert message is not None
        if allowed:
            self._deliver([message])
            return
        self.messages.append(message.model_copy(update={"blocked": reason}))
        text = self._guardrail_text("input", verdict, reason)
        if self.state.stage == "idle":
            self._end_turn("guardrail", text)
        else:
            self.state.last_error = text  # a steering message: the turn goes on without it

    @staticmethod
    def _guardrail_text(kind: str, verdict: GuardrailVerdict | None, reason: str) -> str:
        by = f" {verdict.by}" if verdict is not None and verdict.by else ""
        return f"{kind} guardrail{by}: {reason}"

    def _apply_cancel(self, now: datetime) -> None:
        state = self.state
        request = state.cancel
        assert request is not None
        why = cancel_text(request.by, request.reason)
        if state.stage == "tools":
            self._cancel_batch(why, now)
        state.cancel = None
        if state.stage == "model":
            self._end_turn("cancelled", why)
        else:
            self.reject(f"cancel_turn: the turn had ended before {why}")

    def _cancel_batch(self, why: str, now: datetime) -> None:
        """Every call without a result gets one saying it was cancelled (pairing holds);
        approvals this turn still has open are closed as denied."""
        if self._batch is None:
            self._batch = self._open_batch()
        open_ids = [p.approval_id for p in self.state.pending if p.turn == self.state.turn]
        self.approvals.close_all(open_ids, None, why, now)
        for aid in open_ids:
            self.approvals.take(aid)
        self.tools_finished({})

    def _ending_as_cancel(self) -> CancelTurnSignal | None:
        ending = self.state.ending
        if ending is None:
            return None
        return CancelTurnSignal(by=ending.by, reason=ending.reason or "the session ended")

    def _apply_flushes(self, now: datetime) -> None:
        at = int(now.timestamp() * 1000)
        for request in self.state.flushes:
            self.messages.append(
                FlushMessage(by=request.by, reason=request.reason, mode="user", timestamp=at)
            )
        self.state.flushes.clear()

    def _limits(self) -> BudgetSignal:
        stop, override = self.spec.stop, self.state.budget or BudgetSignal()
        return BudgetSignal(
            max_total_tokens=override.max_total_tokens or stop.max_total_tokens,
            max_cost_usd=override.max_cost_usd or stop.max_cost_usd,
        )

    def _budget_spent(self) -> str | None:
        """Why the budget allows no further model call, if it does not."""
        limits, state = self._limits(), self.state
        if (
            limits.max_total_tokens is not None
            and state.usage.total_tokens >= limits.max_total_tokens
        ):
            return (
                f"token budget spent: {state.usage.total_tokens} of "
                f"{limits.max_total_tokens} tokens"
            )
        if limits.max_cost_usd is not None and state.cost_usd >= limits.max_cost_usd:
            return f"cost budget spent: ${state.cost_usd:.4f} of ${limits.max_cost_usd:.4f}"
        return None

    def _count(self, usage: Usage | None) -> None:
        if usage is None:
            return
        if not usage.total_tokens:
            usage = usage.model_copy(
                update={"total_tokens": usage.prompt_tokens + usage.completion_tokens}
            )
        self.state.usage = self.state.usage + usage
        price = self.model_spec.price
        if price is not None:
            self.state.cost_usd += (
                usage.prompt_tokens * price.input_per_million
                + usage.completion_tokens * price.output_per_million
            ) / 1_000_000

    # --- the model -----------------------------------------------------------------------

    def _model_command(self) -> Command:
        if self._pause is not None:
            delay, self._pause = self._pause, None
            return Pause(delay)
        self.progressed = True
        if self._summarising is None:
            self._summarising = compaction_until(self.messages, self.model_spec.context)
        if self._summarising is not None:
            self.phase = "compacting"
            return Summarise(turn=self.state.turn + 1, until=self._summarising)
        self.phase = "calling_model"
        self.trimmed = self._trimmed()
        return CallModel(turn=self.state.turn + 1)

    def model_setup(self, purpose: Purpose = "reply") -> ModelSetup:
        """What the active agent's model calls share (sent once, then by digest): its
        model, options and tools; for a swarm, also its name and prompt."""
        model, swarm = self.model_spec, self.swarm
        if purpose == "summary":
            return ModelSetup(
                endpoint=model.endpoint,
                model=model.context.summary_model or model.name,
                options=model.options,
                reasoning=model.reasoning,
                stream=False,
            )
        return ModelSetup(
            endpoint=model.endpoint,
            model=model.name,
            options=model.options,
            reasoning=model.reasoning,
            stream=model.stream,
            output_schema=self.spec.output_schema,
            tools=[t.definition for t in self.active_tools.values()],
            context=model.context if model.context.budget_tokens else None,
            agent=None if swarm is None else swarm.active,
            instructions=None if swarm is None else swarm.agent.instructions,
            live=self.spec.session.live_deltas,
        )

    def summarised(self, summary: AssistantMessage, now_ms: int) -> None:
        """The summary stands in for earlier messages from now on (they stay)."""
        assert self._summarising is not None
        self.messages.append(summary_message(summary.content, self._summarising, now_ms))
        self._count(summary.usage)
        self._summarising, self._model_failures = None, 0

    def model_replied(self, assistant: AssistantMessage) -> None:
        self._calling = False
        state = self.state
        state.turn += 1
        state.model_calls_this_reply += 1
        self._count(assistant.usage)
        if assistant.is_error:
            state.last_error = assistant.error
        reason = None
        if self.rescue_enabled and not assistant.is_error:
            reason = unusable_reason(assistant, self.active_tools, self.spec.output_schema)
        if reason is not None:
            self._unusable(assistant, reason)
        elif assistant.tool_calls:
            self.messages.append(assistant)
            state.stage = "tools"
        elif self.spec.guardrails.output and not assistant.is_error:
            self._held = assistant  # the answer joins the array with its verdict
        else:
            self.messages.append(assistant)
            self._replied(assistant, "final_answer")

    # --- rescue ----------------------------------------------------------------------------

    def _unusable(self, reply: AssistantMessage, reason: str) -> None:
        """An unusable turn joins the array; with ``correct`` and attempts left its calls
        run as usual (the model reads their errors) and the rescue follows their results;
        otherwise its calls get results saying they did not run, and the rescue is now."""
        state = self.state
        self.messages.append(reply)
        attempts_left = state.rescues_this_reply < self.spec.rescue.max_attempts
        if reply.tool_calls and attempts_left and self.spec.rescue.strategy == "correct":
            state.rescue_after_tools = reason
            state.stage = "tools"
            return
        self.messages.extend(not_run_results(reply, reason))
        self._rescue(reason, reply.timestamp)

    def _rescue(self, reason: str, at: int | None) -> None:
        """Record the rescue step and apply the strategy (``fail`` once attempts are out)."""
        state = self.state
        state.rescues_this_reply += 1
        attempt = state.rescues_this_reply
        strategy = self.spec.rescue.strategy
        if attempt > self.spec.rescue.max_attempts:
            strategy = "fail"
        content = corrective_text(reason) if strategy == "correct" else reason
        self.messages.append(
            ResqueMessage(
                content=content,
                reason=reason,
                strategy=strategy,
                attempt=attempt,
                mode="tool",
                timestamp=at,
            )
        )
        if strategy == "fail":
            text = f"the model's reply could not be used: {reason}"
            self._end_turn("unusable_reply", text)
            return
        if strategy == "flush":
            latest = self._latest_user_message()
            self.messages.append(
                FlushMessage(by="rescue", reason=reason, mode="tool", timestamp=at)
            )
            if latest is not None:  # asked again, afresh
                self.messages.append(latest.model_copy(update={"mode": "tool", "timestamp": at}))
        state.stage = "model"

    def _latest_user_message(self) -> UserMessage | None:
        for message in reversed(self.messages):
            if isinstance(message, UserMessage) and message.blocked is None:
                return message
        return None

    def model_failed(
        self, kind: str | None, text: str, retry_after: timedelta | None, now_ms: int
    ) -> None:
        """A model call failed: another attempt after a pause while the model's own
        failures leave attempts, else the session fails with ``text`` (a summary that
        cannot be made fails the turn only: the session waits for the next message)."""
        model = self.model_spec
        if kind == MODEL_ATTEMPT_FAILED and self._model_failures + 1 < model.max_attempts:
            self._model_failures += 1
            self._pause = retry_after or backoff(
                model.initial_retry_seconds, model.max_retry_seconds, self._model_failures
            )
            return
        self._calling = False
        if self._summarising is not None:
            self._summarising = None
            self._end_turn("compaction_failed", f"compaction failed: {text}")
            return
        self.state.last_error = text
        self.messages.append(
            AssistantMessage(
                content="", is_error=True, error=text, timestamp=now_ms, agent_name=self.agent_name
            )
        )
        self._outcome = self._finish("failed", "error", error=text)

    def model_cancelled(self) -> None:
        """The model call (or summary) was stopped by ``cancel_turn``: nothing joins."""
        self._calling, self._pause, self._summarising = False, None, None

    def _replied(self, reply: Reply, reason: str) -> None:
        """The model's answer to the latest message is complete: the session goes idle."""
        self.state.stage = "idle"
        self.reply, self.reply_reason = reply, reason
        self.structured = None
        schema = self.spec.output_schema
        if schema is not None and isinstance(reply, AssistantMessage) and not reply.is_error:
            parsed = parse_structured_output(reply.content, schema)
            self.structured = parsed.value
            if parsed.error:
                self.state.last_error = f"structured output: {parsed.error}"

    # --- a tool batch --------------------------------------------------------------------

    def _open_batch(self) -> _Batch:
        """Decide what needs nobody (over the limit, unknown); the gate decides the rest,
        once the predicates it needs have answered."""
        last = self.messages[-1]
        assert isinstance(last, AssistantMessage) and last.tool_calls
        calls = last.tool_calls
        slots: list[ToolMessage | None] = [None] * len(calls)
        questions: list[Question] = []
        limit = self.spec.stop.max_tool_calls_per_turn
        tools = self.active_tools
        for k, call in enumerate(calls):
            resolved = tools.get(call.function.name)
            if k >= limit:
                slots[k] = error_result(call, over_call_limit(len(calls), limit))
            elif resolved is None:
                slots[k] = error_result(call, self._not_registered(call.function.name))
            else:
                questions.extend(self.gate.questions(k, call, resolved))
        batch = _Batch(calls, slots, questions, [], checked=False)
        if not questions:
            self._gate(batch, {})
        return batch

    def _gate(self, batch: _Batch, verdicts: Verdicts) -> None:
        """Each call the gate decides: run (by policy, a rule or a standing grant), refused
        (the result says why), or waiting for a person."""
        tools = self.active_tools
        for k, call in enumerate(batch.calls):
            if batch.slots[k] is not None:
                continue
            asked = self.approvals.find(approval_id(self.state.turn, k))
            if asked is not None:  # asked in an earlier run: its decision stands
                batch.needs_person.append(k)
                if asked.rule is not None:
                    batch.rules[k] = asked.rule
                continue
            outcome = self.gate.decide(k, call, tools[call.function.name], verdicts)
            if outcome.action == "deny" and outcome.rule is None:
                batch.slots[k] = guardrail_denial(call, outcome.reason or "")
            elif outcome.action == "deny":
                record = ApprovalRecord(decision="denied", rule=outcome.rule, reason=outcome.reason)
                batch.slots[k] = denial_result(call, record)
            elif outcome.action == "ask":
                batch.needs_person.append(k)
                if outcome.rule is not None:
                    batch.rules[k] = outcome.rule
            elif outcome.grant is not None:
                grant = outcome.grant
                batch.approvals[k] = self.gate.granted(grant, grant.at, outcome.rule)
            elif outcome.rule is not None:
                batch.approvals[k] = ApprovalRecord(decision="approved", rule=outcome.rule)
        batch.checked = True

    def _not_registered(self, name: str) -> str:
        handoff = None if self.swarm is None else self.swarm.unknown_handoff(name)
        if handoff is not None:
            return handoff
        available = ", ".join(sorted(self.active_tools)) or "none"
        return f"Tool not registered: {name} (available: {available})"

    def _batch_command(self, now: datetime) -> Command:
        if self._batch is None:
            self._batch = self._open_batch()
        batch = self._batch
        if not batch.checked:
            named = [p for _, p in batch.questions]
            predicates = named if any(p is not None for p in named) else None
            return CheckApprovals([batch.calls[k] for k, _ in batch.questions], predicates)
        if batch.needs_person and not batch.decided:
            describing = self._describing(batch)
            if describing and batch.descriptions is None:
                self.phase = "awaiting_approval"
                return DescribeCalls([batch.calls[k] for k in describing])
            if batch.asked is None:
                batch.asked = self._ask(batch, now)
            self.phase = "awaiting_approval"
            return AwaitApprovals(list(batch.asked))
        self.progressed = True
        self.phase = "running_tools"
        tools = self.active_tools
        approved = [k for k in range(len(batch.calls)) if batch.slots[k] is None]
        handoffs = [k for k in approved if tools[batch.calls[k].function.name].handoff]
        if handoffs and self.swarm is not None:  # the session runs these itself
            results, batch.handoff = self.swarm.handoff_results(batch.calls, handoffs, tools)
            for k, result in results.items():
                batch.slots[k] = result.model_copy(update={"approval": batch.approvals.get(k)})
            approved = [k for k in approved if k not in results]
        modes = [tools[batch.calls[k].function.name].policy.execution_mode for k in approved]
        groups = [
            [self._tool_run(batch, k) for k in group] for group in execution_groups(approved, modes)
        ]
        return RunTools(self.state.turn, groups, self.spec.session.max_concurrent_tool_calls)

    def _tool_run(self, batch: _Batch, slot: int) -> ToolRun:
        call = batch.calls[slot]
        resolved = self.active_tools[call.function.name]
        approval = batch.approvals.get(slot)
        if approval is not None and approval.arguments is not None:  # a person's edit runs
            function = call.function.model_copy(update={"arguments": approval.arguments})
            call = call.model_copy(update={"function": function})
        context = self.spec.context
        bound = {param: context[key] for param, key in resolved.bind.items() if key in context}
        uses = references(bound) or references(call.function.arguments)
        secrets = list(self.spec.secrets) if uses else []
        mcp = http = None
        if resolved.mcp is not None:
            server = next(s for s in self.spec.mcp_servers if s.name == resolved.mcp.server)
            mcp = McpCall(server=server, tool=resolved.mcp.tool)
        if resolved.http is not None:
            api = next(a for a in self.spec.openapi if a.name == resolved.http.api)
            http = HttpCall(
                operation=resolved.http, headers=api.headers, timeout_seconds=api.timeout_seconds
            )
        agent = next((a.spec for a in self.spec.agents if a.name == resolved.agent), None)
        return ToolRun(
            slot, call, resolved, approval, bound, secrets, mcp, http, agent, self.agent_name
        )

    def approvals_checked(self, verdicts: list[bool]) -> None:
        """The predicates' answers to the batch's questions, in order."""
        assert self._batch is not None
        batch = self._batch
        self._gate(batch, dict(zip(batch.questions, verdicts, strict=True)))

    def calls_described(self, descriptions: list[str]) -> None:
        """The tools' own readable forms of the calls that wait (``DescribeCalls``)."""
        batch = self._batch
        assert batch is not None
        batch.descriptions = dict(zip(self._describing(batch), descriptions, strict=True))

    def _describing(self, batch: _Batch) -> list[int]:
        """The waiting calls whose tools describe them."""
        tools = self.active_tools
        return [k for k in batch.needs_person if tools[batch.calls[k].function.name].describes]

    def _ask(self, batch: _Batch, now: datetime) -> dict[str, int]:
        asked: dict[str, int] = {}
        descriptions = batch.descriptions or {}
        for k in batch.needs_person:
            call = batch.calls[k]
            tool = self.active_tools[call.function.name]
            timeout = tool.policy.approval_timeout_seconds
            aid = approval_id(self.state.turn, k)
            asked[aid] = k
            name, arguments = call.function.name, call.function.arguments
            self.approvals.open(
                PendingApproval(
                    approval_id=aid,
                    turn=self.state.turn,
                    slot=k,
                    tool_name=name,
                    arguments=arguments,
                    requested_at=now,
                    deadline=now + timedelta(seconds=timeout) if timeout else None,
                    described_arguments=descriptions.get(k) or describe_arguments(name, arguments),
                    approvers=self.gate.approvers(tool),
                    rule=batch.rules.get(k),
                )
            )
        return asked

    def timeout_decision(self, pending: PendingApproval) -> ApprovalDecision:
        """What a deadline decides for a call: its tool's default."""
        tool = self.active_tools[pending.tool_name]
        decision: ApprovalDecision = tool.policy.approval_timeout_decision
        return decision

    def approvals_waited(self, now: datetime) -> None:
        """The wait for the batch's approvals ended: all decided (deadlines included), the
        session is ending (the rest are denied), or a continue-as-new is due (the batch
        stays open, its approvals carried)."""
        batch = self._batch
        assert batch is not None and batch.asked is not None
        ids = list(batch.asked)
        if self.state.ending is not None:
            reason = self.state.ending.reason or "the session ended before a decision"
            self.approvals.close_all(ids, self.state.ending.by, reason, now)
        if not self.approvals.all_decided(ids):
            if not (self.state.unverified or self.state.to_notify):
                self._batch = None  # decided again by the next run
            return
        for aid, k in batch.asked.items():
            accepted = self.state.accepted.get(aid)
            record = self.approvals.take(aid)
            call = batch.calls[k]
            if record.decision == "denied":
                batch.slots[k] = denial_result(call, record)
            elif record.decision == "responded" and accepted is not None:
                batch.slots[k] = ToolMessage(
                    tool_call_id=call.id,
                    content=accepted.content or "",
                    tool_name=call.function.name,
                    is_error=True if accepted.is_error else None,
                    approval=record,
                    timestamp=int(now.timestamp() * 1000),
                )
            else:
                batch.approvals[k] = record
        batch.decided = True

    def tools_finished(self, results: dict[int, ToolMessage]) -> None:
        """Every approved call's result, by slot: the batch's results are appended in
        request order, whatever order they finished in."""
        batch = self._batch
        assert batch is not None
        for k, result in results.items():
            batch.slots[k] = result
        cancel = self.state.cancel or self._ending_as_cancel()
        if cancel is not None:  # calls the cancellation (or the end) stopped
            why = cancel_text(cancel.by, cancel.reason)
            for k, slot in enumerate(batch.slots):
                if slot is None:
                    batch.slots[k] = cancelled_result(batch.calls[k], why)
        in_order = [s for s in batch.slots if s is not None]
        assert len(in_order) == len(batch.calls), "one result per call"
        if self.swarm is not None:  # the activities' results carry it already
            agent = {"agent_name": self.agent_name}
            in_order = [r if r.agent_name else r.model_copy(update=agent) for r in in_order]
        self.messages.extend(in_order)
        if batch.handoff is not None and self.swarm is not None:
            self.swarm.hand_over(batch.handoff)
        self.state.child_pending.clear()  # the batch's sub-agents are all over
        self.state.forwards.clear()
        for result in in_order:
            self._count(result.usage)  # what tools spent on models (sub-agents) counts too
        self._batch = None
        self.state.stage = "model"
        reason, self.state.rescue_after_tools = self.state.rescue_after_tools, None
        if reason is not None:
            self._rescue(reason, in_order[-1].timestamp)
            return
        stops = [r for r in in_order if r.tool_name in self.spec.stop.on_tools and not r.is_error]
        if stops:
            self._replied(stops[0], f"stop_tool:{stops[0].tool_name}")

    # --- continue-as-new and the end -----------------------------------------------------

    def for_next_run(self) -> SessionState:
        """The state a fresh run continues from (the array inline; the workflow swaps it
        for a reference when it does not fit one payload)."""
        return self.state.model_copy(update={"runs": self.state.runs + 1, "transcript": None})

    def _last_reply(self) -> Reply | None:
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage | ToolMessage):
                return message
        return None

    def _finish(
        self, status: Any, stop_reason: str, *, final: Reply | None = None, error: str | None = None
    ) -> Finish:
        state = self.state
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
                structured_output=self.structured if final is self.reply else None,
                error=error,
                turns=state.turn,
                message_count=len(self.messages),
                usage=state.usage,
            )
        )

    def status(self) -> SessionStatus:
        state = self.state
        return SessionStatus(
            phase=self.phase,
            turn=state.turn,
            message_count=len(self.messages),
            pending_approvals=self.pending_approvals(),
            usage=state.usage,
            last_error=state.last_error,
            rejected_signals=list(state.rejected_signals),
            queued_messages=len(state.inbox),
            runs=state.runs,
            cancel_pending=state.cancel is not None,
            flushes_pending=len(state.flushes),
            compacted=sum(
                1
                for m in self.messages[: window_start(self.messages)[0]]
                if not isinstance(m, SystemMessage | FlushMessage)
            ),
            budget=self._budget_status(),
            trimmed=self.trimmed,
            grants=list(state.grants),
            agent=self.agent_name,
            agent_stack=list(state.agent_stack),
            agents=self.spec.agent_names(),
            move_pending=state.move.agent if state.move is not None else None,
        )

    def _trimmed(self) -> int:
        """Messages the request about to be made leaves out to fit the context budget."""
        rules = self.model_spec.context
        if rules.budget_tokens is None:
            return 0
        whole = prepare_request_messages(self.messages)
        return len(whole) - len(prepare_request_messages(self.messages, rules))

    def _budget_status(self) -> BudgetStatus | None:
        limits = self._limits()
        if limits.max_total_tokens is None and limits.max_cost_usd is None:
            return None
        return BudgetStatus(
            max_total_tokens=limits.max_total_tokens,
            max_cost_usd=limits.max_cost_usd,
            total_tokens=self.state.usage.total_tokens,
            cost_usd=self.state.cost_usd if self.spec.model.price is not None else None,
        )
