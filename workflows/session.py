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
from typing import Any

from durable_agent.contracts import (
    MODEL_ATTEMPT_FAILED,
    AgentResult,
    ApprovalSignal,
    EndSessionSignal,
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
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from durable_agent.spec import AgentInput, AgentSpec
from durable_agent.structured_output import parse_structured_output
from durable_agent.transcript import Transcript
from workflows.approvals import Approvals
from workflows.commands import (
    AwaitApprovals,
    CallModel,
    CheckApprovals,
    Command,
    ContinueAsNew,
    Finish,
    Pause,
    RunTools,
    ToolRun,
    WaitForMessage,
)
from workflows.state import SessionState
from workflows.turn_logic import (
    apply_overrides,
    approval_id,
    backoff,
    denial_result,
    error_result,
    execution_groups,
    guardrail_denial,
    over_call_limit,
    stage_after,
)

MAX_REJECTED_SIGNALS_KEPT = 50
Reply = AssistantMessage | ToolMessage


@dataclass
class _Batch:
    """The open tool batch (the last assistant message's calls), as this run decides it.
    Not carried: a new run decides it again (approvals already asked keep their ids,
    deadlines and decisions, which the state carries)."""

    calls: list[ToolCall]
    slots: list[ToolMessage | None]
    by_predicate: list[int]
    needs_person: list[int]
    checked: bool
    approvals: dict[int, ApprovalRecord] = field(default_factory=dict)
    asked: dict[str, int] | None = None
    """Approval id -> slot, once the approvals were opened."""
    decided: bool = False


class Session:
    def __init__(self, spec: AgentSpec, state: SessionState) -> None:
        self.spec = spec
        self.state = state
        self.messages = Transcript.adopt(state.messages)
        self.approvals = Approvals(state)
        self.tools: dict[str, ResolvedTool] = {t.definition.name: t for t in state.tools}
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

    # --- starting ----------------------------------------------------------------------

    def tools_resolved(self, result: ResolveToolsResult) -> str | None:
        """Record the tools as workers described them; why the session cannot start, if
        it cannot."""
        if result.missing:
            return (
                "spec.tools names tools that no worker has loaded: "
                + ", ".join(result.missing)
            )
        self.tools = apply_overrides(self.spec, result.tools)
        self.state.tools = list(self.tools.values())
        return None

    def start(self, request: AgentInput, now_ms: int) -> None:
        """The conversation of a fresh session: instructions, given history, first message."""
        if self.spec.instructions:
            self.messages.append(SystemMessage(content=self.spec.instructions, timestamp=now_ms))
        self.messages.extend(request.history)
        if request.message is not None:
            first = request.message
            if isinstance(first, str):
                first = UserMessage(content=first)
            self.messages.append(first.model_copy(update={"timestamp": now_ms}))
        self.state.stage = stage_after(self.messages)

    # --- what people send (signals record only) ------------------------------------------

    def message_arrived(self, message: UserMessage, now_ms: int) -> str | None:
        """Queue a user message for the next turn boundary; why it was rejected, if it was."""
        size = len(message.content) if isinstance(message.content, str) else None
        limit = self.spec.session.max_message_chars
        if message.content in ("", []):
            return self.reject("send_message: empty message")
        if size is not None and size > limit:
            return self.reject(f"send_message: {size} characters is over the limit of {limit}")
        if self.state.ending is not None:
            return self.reject("send_message: the session is ending")
        self.state.inbox.append(message.model_copy(update={"timestamp": now_ms}))
        return None

    def decision_arrived(
        self, signal: ApprovalSignal, decision: ApprovalDecision, now: datetime
    ) -> str | None:
        rejection = self.approvals.record(signal, decision, now)
        return None if rejection is None else self.reject(rejection)

    def end_requested(self, request: EndSessionSignal) -> None:
        if self.state.ending is None:
            self.state.ending = request

    def reject(self, text: str) -> str:
        """Keep a signal that changed nothing visible in ``status``; returns the text."""
        self.state.rejected_signals = [*self.state.rejected_signals, text][
            -MAX_REJECTED_SIGNALS_KEPT:
        ]
        return text

    # --- deciding ------------------------------------------------------------------------

    def continue_as_new_due(self, suggested: bool) -> bool:
        """``suggested``: the run's history is long (the server says so, or the spec's
        event limit is reached). Only a run that did some work hands over."""
        return self.progressed and suggested

    def interrupted(self, suggested: bool) -> bool:
        """A wait must end early: the session is ending, or a continue-as-new is due."""
        return self.state.ending is not None or self.continue_as_new_due(suggested)

    def next_command(self, *, suggested: bool, now: datetime) -> Command:
        """What the workflow does next. ``suggested``: see ``continue_as_new_due``."""
        state = self.state
        if self._outcome is not None:
            return self._outcome
        if self._calling:
            return self._model_command()
        if state.ending is not None and state.stage != "tools":
            return self._finish("done", "ended", final=self._last_reply())
        if state.stage != "tools" and state.inbox:
            self._deliver_queued_messages()
        rules = self.spec.session
        if state.stage == "idle" and self.reply is not None and rules.end_after_reply:
            return self._finish("done", self.reply_reason, final=self.reply)
        if self.continue_as_new_due(suggested):
            return ContinueAsNew()
        if state.stage == "model":
            if state.model_calls_this_reply >= self.spec.stop.max_turns:
                text = f"Agent loop exceeded {self.spec.stop.max_turns} iterations"
                return self._finish("failed", "max_turns", error=text)
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

    def _deliver_queued_messages(self) -> None:
        self.messages.extend(self.state.inbox)
        self.state.inbox.clear()
        self.state.stage = "model"
        self.state.model_calls_this_reply = 0
        self.reply = None

    # --- the model -----------------------------------------------------------------------

    def _model_command(self) -> Command:
        if self._pause is not None:
            delay, self._pause = self._pause, None
            return Pause(delay)
        self.phase = "calling_model"
        self.progressed = True
        return CallModel(turn=self.state.turn + 1)

    def model_replied(self, assistant: AssistantMessage) -> None:
        self._calling = False
        state = self.state
        state.turn += 1
        state.model_calls_this_reply += 1
        self.messages.append(assistant)
        if assistant.usage is not None:
            state.usage = state.usage + assistant.usage
        if assistant.is_error:
            state.last_error = assistant.error
        if assistant.tool_calls:
            state.stage = "tools"
        else:
            self._replied(assistant, "final_answer")

    def model_failed(
        self, kind: str | None, text: str, retry_after: timedelta | None, now_ms: int
    ) -> None:
        """A model call failed: another attempt after a pause while the model's own
        failures leave attempts, else the session fails with ``text``."""
        model = self.spec.model
        if kind == MODEL_ATTEMPT_FAILED and self._model_failures + 1 < model.max_attempts:
            self._model_failures += 1
            self._pause = retry_after or backoff(
                model.initial_retry_seconds, model.max_retry_seconds, self._model_failures
            )
            return
        self._calling = False
        self.state.last_error = text
        self.messages.append(
            AssistantMessage(content="", is_error=True, error=text, timestamp=now_ms)
        )
        self._outcome = self._finish("failed", "error", error=text)

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
        """Decide what needs nobody: over the limit, unknown, denied by policy; and which
        calls a person or a predicate must decide."""
        last = self.messages[-1]
        assert isinstance(last, AssistantMessage) and last.tool_calls
        calls = last.tool_calls
        slots: list[ToolMessage | None] = [None] * len(calls)
        needs_person: list[int] = []
        by_predicate: list[int] = []
        limit = self.spec.stop.max_tool_calls_per_turn
        for k, call in enumerate(calls):
            resolved = self.tools.get(call.function.name)
            if k >= limit:
                slots[k] = error_result(call, over_call_limit(len(calls), limit))
            elif resolved is None:
                available = ", ".join(sorted(self.tools)) or "none"
                slots[k] = error_result(
                    call, f"Tool not registered: {call.function.name} (available: {available})"
                )
            elif resolved.policy.approval == "deny":
                slots[k] = guardrail_denial(call, resolved.policy.deny_reason)
            elif resolved.policy.approval == "always":
                needs_person.append(k)
            elif resolved.policy.approval == "predicate":
                by_predicate.append(k)
        return _Batch(calls, slots, by_predicate, needs_person, checked=not by_predicate)

    def _batch_command(self, now: datetime) -> Command:
        if self._batch is None:
            self._batch = self._open_batch()
        batch = self._batch
        if not batch.checked:
            return CheckApprovals([batch.calls[k] for k in batch.by_predicate])
        if batch.needs_person and not batch.decided:
            if batch.asked is None:
                batch.asked = self._ask(batch, now)
            self.phase = "awaiting_approval"
            return AwaitApprovals(list(batch.asked))
        self.progressed = True
        self.phase = "running_tools"
        approved = [k for k in range(len(batch.calls)) if batch.slots[k] is None]
        modes = [self.tools[batch.calls[k].function.name].policy.execution_mode for k in approved]
        groups = [
            [self._tool_run(batch, k) for k in group]
            for group in execution_groups(approved, modes)
        ]
        return RunTools(self.state.turn, groups, self.spec.session.max_concurrent_tool_calls)

    def _tool_run(self, batch: _Batch, slot: int) -> ToolRun:
        call = batch.calls[slot]
        resolved = self.tools[call.function.name]
        context = self.spec.context
        bound = {param: context[key] for param, key in resolved.bind.items() if key in context}
        return ToolRun(slot, call, resolved, batch.approvals.get(slot), bound)

    def approvals_checked(self, verdicts: list[bool]) -> None:
        """The predicates' answers for the batch's predicate calls, in order."""
        assert self._batch is not None
        batch = self._batch
        batch.needs_person.extend(
            k for k, needed in zip(batch.by_predicate, verdicts, strict=True) if needed
        )
        batch.needs_person.sort()
        batch.checked = True

    def _ask(self, batch: _Batch, now: datetime) -> dict[str, int]:
        asked: dict[str, int] = {}
        for k in batch.needs_person:
            call = batch.calls[k]
            timeout = self.tools[call.function.name].policy.approval_timeout_seconds
            aid = approval_id(self.state.turn, k)
            asked[aid] = k
            self.approvals.open(
                PendingApproval(
                    approval_id=aid,
                    turn=self.state.turn,
                    slot=k,
                    tool_name=call.function.name,
                    arguments=call.function.arguments,
                    requested_at=now,
                    deadline=now + timedelta(seconds=timeout) if timeout else None,
                )
            )
        return asked

    def timeout_decision(self, pending: PendingApproval) -> ApprovalDecision:
        """What a deadline decides for a call: its tool's default."""
        decision: ApprovalDecision = self.tools[pending.tool_name].policy.approval_timeout_decision
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
            self._batch = None  # decided again by the next run
            return
        for aid, k in batch.asked.items():
            record = self.approvals.take(aid)
            if record.decision == "denied":
                batch.slots[k] = denial_result(batch.calls[k], record)
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
        in_order = [s for s in batch.slots if s is not None]
        assert len(in_order) == len(batch.calls), "one result per call"
        self.messages.extend(in_order)
        self._batch = None
        self.state.stage = "model"
        stops = [
            r for r in in_order if r.tool_name in self.spec.stop.on_tools and not r.is_error
        ]
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
            pending_approvals=self.approvals.undecided(),
            usage=state.usage,
            last_error=state.last_error,
            rejected_signals=list(state.rejected_signals),
            queued_messages=len(state.inbox),
            runs=state.runs,
        )
