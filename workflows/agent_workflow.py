"""AgentWorkflow: one session, one conversation. Its state is the message array.

A turn: the model activity -> the assistant message appended -> the whole tool
batch gated once -> approved calls run as activities (concurrently by default)
-> one slot per call filled in place -> slots appended in request order.
After a final answer the session waits, durably, for the next message.
Signal handlers only record; the main loop decides.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from durable_agent.contracts import (
        MODEL_ATTEMPT_FAILED,
        MODEL_SETUP_UNKNOWN,
        TOOL_RAISED,
        TOOL_TIMEOUT_GRACE_SECONDS,
        TRANSCRIPT_UNKNOWN,
        WORKFLOW_NAME,
        AgentResult,
        ApprovalCheckInput,
        ApprovalSignal,
        EndSessionSignal,
        ModelCallInput,
        ModelSetup,
        PendingApproval,
        Phase,
        ResolvedTool,
        ResolveToolsInput,
        ResolveToolsResult,
        SessionStatus,
        Stage,
        ToolCallInput,
        TranscriptRef,
    )
    from durable_agent.messages import (
        ApprovalDecision,
        ApprovalRecord,
        AssistantMessage,
        Message,
        SystemMessage,
        ToolCall,
        ToolMessage,
        Usage,
        UserMessage,
    )
    from durable_agent.spec import AgentInput, AgentSpec, ModelSpec, SessionState
    from durable_agent.structured_output import parse_structured_output
    from durable_agent.transcript import Transcript
    from workflows.approval_gate import ApprovalGate
    from workflows.inputs import InvalidInput, decode
    from workflows.retries import LOST_WORK_RETRIES, MAX_TOOL_RETRY_SECONDS, backoff, give_up_after
    from workflows.transcript_sync import PAYLOAD_MARGIN_BYTES, PayloadTooLarge, TranscriptSync
    from workflows.turn_logic import (
        apply_overrides,
        approval_id,
        call_summary,
        denial_result,
        error_result,
        execution_groups,
        guardrail_denial,
        over_call_limit,
        session_title,
        setup_digest,
        stage_after,
    )

MAX_REJECTED_SIGNALS_KEPT = 50
#: Re-sends of one model call's transcript before the session fails: a store that loses
#: it again at once is not shared by the workers (or not kept), and retrying cannot help.
MAX_STORE_REFILLS = 2


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
            request: AgentInput = decode(raw, AgentInput)
        except InvalidInput as error:  # run() fails the session with this text
            self._invalid_input = str(error)
            request = AgentInput.model_construct(spec=PLACEHOLDER_SPEC, carried=None)
        self._request = request
        self._spec: AgentSpec = request.spec
        carried = request.carried or SessionState(
            messages=[], stage="idle", turn=0, model_calls_this_reply=0, usage=Usage(), tools=[]
        )
        self._messages = Transcript(carried.messages)
        self._sync = TranscriptSync(
            self._messages,
            carried.stored_count,
            self._spec.session.payload_budget_bytes,
            self._heartbeat_timeout(),
        )
        self._stage: Stage = carried.stage
        self._phase: Phase = "starting"
        self._turn = carried.turn
        self._model_calls = carried.model_calls_this_reply
        self._usage = carried.usage
        self._gate = ApprovalGate(carried.pending, carried.decisions)
        self._inbox: list[UserMessage] = list(carried.inbox)
        self._rejected = list(carried.rejected_signals)
        self._last_error = carried.last_error
        self._ending = carried.ending
        self._runs = carried.runs
        self._tools: dict[str, ResolvedTool] = {t.definition.name: t for t in carried.tools}
        self._setup: tuple[ModelSetup, str] | None = None
        self._send_setup = False
        self._progressed = False  # this run has done work: continue-as-new may follow
        self._reply: AssistantMessage | ToolMessage | None = None
        self._reply_reason = "final_answer"
        self._structured: Any = None

    # --- the session ---------------------------------------------------------------

    @workflow.run
    async def run(self, raw: RawValue) -> AgentResult:
        if self._invalid_input is not None:
            raise ApplicationError(
                f"invalid session input: {self._invalid_input}",
                type="InvalidInput",
                non_retryable=True,
            )
        request = self._request
        if request.carried is None:
            await self._resolve_tools()
            self._start_conversation(request)
            self._send_setup = True  # the first call seeds the workers' cache
            # Added after sessions were recorded: a command that older histories lack,
            # so it is patched in (see "Changing workflow code" in the README).
            if workflow.patched(SESSION_TITLE_PATCH):
                workflow.upsert_memo({"title": session_title(self._messages)})
        elif request.carried.transcript is not None:
            await self._sync.load(request.carried.transcript)
        try:
            return await self._session()
        except PayloadTooLarge as error:
            return self._end("failed", "error", error=str(error))

    async def _resolve_tools(self) -> None:
        spec = self._spec
        if not spec.tools:
            return
        resolved = await workflow.execute_activity(
            "resolve_tools",
            ResolveToolsInput(names=[t.name for t in spec.tools]),
            result_type=ResolveToolsResult,
            start_to_close_timeout=timedelta(seconds=30),
            heartbeat_timeout=self._heartbeat_timeout(),
            retry_policy=LOST_WORK_RETRIES,
            summary=f"resolve_tools {', '.join(t.name for t in spec.tools)}",
        )
        if resolved.missing:
            raise ApplicationError(
                f"spec.tools names tools that no worker has loaded: {', '.join(resolved.missing)}",
                type="UnknownTool",
                non_retryable=True,
            )
        self._tools = apply_overrides(spec, resolved.tools)

    def _start_conversation(self, request: AgentInput) -> None:
        if self._spec.instructions:
            self._messages.append(
                SystemMessage(content=self._spec.instructions, timestamp=_now_ms())
            )
        self._messages.extend(request.history)
        if request.message is not None:
            first = request.message
            if isinstance(first, str):
                first = UserMessage(content=first)
            self._messages.append(first.model_copy(update={"timestamp": _now_ms()}))
        self._stage = stage_after(self._messages)

    async def _session(self) -> AgentResult:
        rules = self._spec.session
        while True:
            if self._ending is not None and self._stage != "tools":
                return self._end("done", "ended", final=self._last_reply())
            if self._stage != "tools" and self._inbox:
                self._deliver_queued_messages()
            if self._stage == "idle" and self._reply is not None and rules.end_after_reply:
                return self._end("done", self._reply_reason, final=self._reply)
            if self._continue_as_new_due():
                await self._continue_as_new()
            if self._stage == "model":
                if self._model_calls >= self._spec.stop.max_turns:
                    text = f"Agent loop exceeded {self._spec.stop.max_turns} iterations"
                    return self._end("failed", "max_turns", error=text)
                assistant = await self._call_model()
                if assistant is None:
                    return self._end("failed", "error", error=self._last_error)
                if assistant.tool_calls:
                    self._stage = "tools"
                else:
                    self._replied(assistant, "final_answer")
            elif self._stage == "tools":
                if not await self._run_open_batch():
                    continue  # interrupted while awaiting approval: continue-as-new first
            elif not await self._wait_for_message():
                return self._end("done", "idle_timeout", final=self._last_reply())

    def _deliver_queued_messages(self) -> None:
        self._messages.extend(self._inbox)
        self._inbox.clear()
        self._stage = "model"
        self._model_calls = 0
        self._reply = None

    def _replied(self, reply: AssistantMessage | ToolMessage, reason: str) -> None:
        """The model's answer to the latest message is complete: the session goes idle."""
        self._stage = "idle"
        self._reply, self._reply_reason = reply, reason
        self._structured = None
        schema = self._spec.output_schema
        if schema is not None and isinstance(reply, AssistantMessage) and not reply.is_error:
            parsed = parse_structured_output(reply.content, schema)
            self._structured = parsed.value
            if parsed.error:
                self._last_error = f"structured output: {parsed.error}"

    async def _wait_for_message(self) -> bool:
        """Idle until a message, the end of the session, or a continue-as-new is due.
        False when the idle timeout passed first."""
        self._phase = "idle"
        timeout = self._spec.session.idle_timeout_seconds
        try:
            await workflow.wait_condition(
                lambda: (
                    bool(self._inbox) or self._ending is not None or self._continue_as_new_due()
                ),
                timeout=timedelta(seconds=timeout) if timeout else None,
            )
        except TimeoutError:
            return False
        return True

    # --- continue-as-new -------------------------------------------------------------

    def _interrupted(self) -> bool:
        """A wait must end early: the session is ending, or a continue-as-new is due."""
        return self._ending is not None or self._continue_as_new_due()

    def _continue_as_new_due(self) -> bool:
        if not self._progressed:
            return False
        info = workflow.info()
        limit = self._spec.session.continue_as_new_after_events
        over_limit = limit is not None and info.get_current_history_length() >= limit
        return over_limit or info.is_continue_as_new_suggested()

    async def _continue_as_new(self) -> None:
        """Hand the whole session to a fresh run. Called only between activities."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        state = self._carried_state()
        others = len(AgentInput(spec=self._spec, carried=state).model_dump_json())
        room = self._spec.session.payload_budget_bytes - PAYLOAD_MARGIN_BYTES // 8
        if others + self._messages.json_bytes() > room:
            # too big for one payload: refresh the whole array in the store, in pieces,
            # and let the next run read it back from there
            self._sync.lost()
            await self._sync.store_pieces(until_inline_bytes=0)
            await workflow.wait_condition(workflow.all_handlers_finished)
            ref = TranscriptRef(count=len(self._messages), hash=self._messages.head)
            state = self._carried_state().model_copy(update={"transcript": ref})
        else:
            state = state.model_copy(update={"messages": self._messages.as_list()})
        workflow.continue_as_new(AgentInput(spec=self._spec, carried=state))

    def _carried_state(self) -> SessionState:
        """The session's state for the next run, without its messages."""
        return SessionState(
            messages=[],
            stored_count=self._sync.stored,
            stage=self._stage,
            turn=self._turn,
            model_calls_this_reply=self._model_calls,
            usage=self._usage,
            tools=list(self._tools.values()),
            pending=list(self._gate.pending.values()),
            decisions=self._gate.decisions,
            inbox=self._inbox,
            rejected_signals=self._rejected,
            last_error=self._last_error,
            ending=self._ending,
            runs=self._runs + 1,
        )

    # --- the model ---------------------------------------------------------------------

    def _model_setup(self) -> tuple[ModelSetup, str]:
        """The session's model setup and its digest (built once a run)."""
        if self._setup is None:
            model = self._spec.model
            setup = ModelSetup(
                endpoint=model.endpoint,
                model=model.name,
                options=model.options,
                reasoning=model.reasoning,
                stream=model.stream,
                output_schema=self._spec.output_schema,
                tools=[t.definition for t in self._tools.values()],
            )
            self._setup = (setup, setup_digest(setup))
        return self._setup

    async def _call_model(self) -> AssistantMessage | None:
        self._phase = "calling_model"
        self._progressed = True
        model = self._spec.model
        setup, digest = self._model_setup()
        lost_store = failures = 0
        while True:
            setup_bytes = len(setup.model_dump_json()) if self._send_setup else 0
            await self._sync.store_pieces(until_inline_bytes=self._sync.room - setup_bytes)
            call = ModelCallInput(
                turn=self._turn + 1,
                setup_digest=digest,
                setup=setup if self._send_setup else None,
                transcript=self._sync.reference(),
                messages=self._sync.new_messages(),
                head=self._messages.head,
            )
            try:
                assistant: AssistantMessage = await workflow.execute_activity(
                    "call_model",
                    call,
                    result_type=AssistantMessage,
                    start_to_close_timeout=timedelta(seconds=model.timeout_seconds),
                    heartbeat_timeout=self._heartbeat_timeout(),
                    schedule_to_close_timeout=give_up_after(
                        model.timeout_seconds, self._spec.session.recovery_limit_seconds
                    ),
                    retry_policy=LOST_WORK_RETRIES,
                    summary=f"call_model {model.name} turn {self._turn + 1}",
                )
            except ActivityError as error:
                cause = error.cause
                kind = cause.type if isinstance(cause, ApplicationError) else None
                if kind == MODEL_ATTEMPT_FAILED and failures + 1 < model.max_attempts:
                    # the model's own failure: one of its attempts, then a durable wait
                    failures += 1
                    assert isinstance(cause, ApplicationError)
                    await workflow.sleep(
                        cause.next_retry_delay
                        or backoff(model.initial_retry_seconds, model.max_retry_seconds, failures)
                    )
                    continue
                if kind == MODEL_SETUP_UNKNOWN and not self._send_setup:
                    self._send_setup = True  # this worker lacks it: send it once
                    continue
                if kind == TRANSCRIPT_UNKNOWN and lost_store < MAX_STORE_REFILLS:
                    # the store lost what the call referred to: send it all again, once
                    lost_store += 1
                    self._sync.lost()
                    continue
                text = cause.message if isinstance(cause, ApplicationError) else str(error)
                if isinstance(cause, ActivityTimeout):
                    text = self._gave_up_text("the model call")
                if kind == TRANSCRIPT_UNKNOWN:
                    text += " (the transcript store lost it again: do all workers share one?)"
                self._last_error = text
                self._messages.append(
                    AssistantMessage(content="", is_error=True, error=text, timestamp=_now_ms())
                )
                return None
            self._send_setup = False
            break
        self._turn += 1
        self._model_calls += 1
        self._messages.append(assistant)
        self._sync.all_stored()
        if assistant.usage is not None:
            self._usage = self._usage + assistant.usage
        if assistant.is_error:
            self._last_error = assistant.error
        return assistant

    # --- a tool batch ------------------------------------------------------------------

    async def _run_open_batch(self) -> bool:
        """Run the tool calls of the last assistant message; False if interrupted before
        anything ran (the batch stays open and is carried over continue-as-new)."""
        last = self._messages[-1]
        assert isinstance(last, AssistantMessage) and last.tool_calls
        calls = last.tool_calls
        slots: list[ToolMessage | None] = [None] * len(calls)
        approvals: dict[int, ApprovalRecord] = {}
        if not await self._gate_batch(calls, slots, approvals):
            return False
        self._progressed = True
        self._phase = "running_tools"
        approved = [k for k in range(len(calls)) if slots[k] is None]
        modes = [self._tools[calls[k].function.name].policy.execution_mode for k in approved]
        stored: set[int] = set()  # slots whose result the tool activity stored as it is
        places = asyncio.Semaphore(self._spec.session.max_concurrent_tool_calls)

        async def run_in_place(k: int) -> tuple[ToolMessage, bool]:
            async with places:  # a batch of any size runs in bounded waves
                return await self._run_tool(calls[k], k, approvals.get(k))

        for group in execution_groups(approved, modes):
            results = await asyncio.gather(*(run_in_place(k) for k in group))
            for k, (result, as_returned) in zip(group, results, strict=True):
                slots[k] = result
                if as_returned:
                    stored.add(k)
        results_in_order = [s for s in slots if s is not None]
        first = len(self._messages)
        self._sync.stored_by_tool({first + k for k in stored})
        self._messages.extend(results_in_order)
        self._stage = "model"
        stops = [
            r
            for r in results_in_order
            if r.tool_name in self._spec.stop.on_tools and not r.is_error
        ]
        if stops:
            self._replied(stops[0], f"stop_tool:{stops[0].tool_name}")
        return True

    async def _gate_batch(
        self,
        calls: list[ToolCall],
        slots: list[ToolMessage | None],
        approvals: dict[int, ApprovalRecord],
    ) -> bool:
        """Decide the whole batch once, before anything runs."""
        needs_person: list[int] = []
        by_predicate: list[int] = []
        limit = self._spec.stop.max_tool_calls_per_turn
        for k, call in enumerate(calls):
            resolved = self._tools.get(call.function.name)
            if k >= limit:
                slots[k] = error_result(call, over_call_limit(len(calls), limit))
            elif resolved is None:
                available = ", ".join(sorted(self._tools)) or "none"
                slots[k] = error_result(
                    call, f"Tool not registered: {call.function.name} (available: {available})"
                )
            elif resolved.policy.approval == "deny":
                slots[k] = guardrail_denial(call, resolved.policy.deny_reason)
            elif resolved.policy.approval == "always":
                needs_person.append(k)
            elif resolved.policy.approval == "predicate":
                by_predicate.append(k)
        if by_predicate:
            verdicts = await workflow.execute_activity(
                "check_approvals",
                ApprovalCheckInput(
                    calls=[
                        (calls[k].function.name, calls[k].function.arguments) for k in by_predicate
                    ]
                ),
                result_type=list[bool],
                start_to_close_timeout=timedelta(seconds=30),
                heartbeat_timeout=self._heartbeat_timeout(),
                retry_policy=LOST_WORK_RETRIES,
                summary=f"check_approvals {len(by_predicate)} calls",
            )
            needs_person.extend(
                k for k, needed in zip(by_predicate, verdicts, strict=True) if needed
            )
            needs_person.sort()
        if not needs_person:
            return True
        return await self._await_approvals(calls, needs_person, slots, approvals)

    async def _await_approvals(
        self,
        calls: list[ToolCall],
        needed: list[int],
        slots: list[ToolMessage | None],
        approvals: dict[int, ApprovalRecord],
    ) -> bool:
        now = workflow.now()
        ids: dict[str, int] = {}
        for k in needed:
            call = calls[k]
            timeout = self._tools[call.function.name].policy.approval_timeout_seconds
            aid = approval_id(self._turn, k)
            ids[aid] = k
            self._gate.open(
                PendingApproval(
                    approval_id=aid,
                    turn=self._turn,
                    slot=k,
                    tool_name=call.function.name,
                    arguments=call.function.arguments,
                    requested_at=now,
                    deadline=now + timedelta(seconds=timeout) if timeout else None,
                )
            )
        self._phase = "awaiting_approval"
        await self._gate.wait(list(ids), self._timeout_decision, self._interrupted)
        if self._ending is not None:
            reason = self._ending.reason or "the session ended before a decision"
            self._gate.close_all(list(ids), self._ending.by, reason)
        if not self._gate.all_decided(list(ids)):
            return False
        for aid, k in ids.items():
            record = self._gate.take(aid)
            if record.decision == "denied":
                slots[k] = denial_result(calls[k], record)
            else:
                approvals[k] = record
        return True

    def _timeout_decision(self, pending: PendingApproval) -> ApprovalDecision:
        decision: ApprovalDecision = self._tools[pending.tool_name].policy.approval_timeout_decision
        return decision

    async def _run_tool(
        self, call: ToolCall, slot: int, approval: ApprovalRecord | None
    ) -> tuple[ToolMessage, bool]:
        """The slot's result, and whether it is exactly what the activity returned."""
        resolved = self._tools[call.function.name]
        policy = resolved.policy
        context = self._spec.context
        bound = {param: context[key] for param, key in resolved.bind.items() if key in context}
        attempt = 1
        while True:
            try:
                result: ToolMessage = await workflow.execute_activity(
                    "run_tool",
                    ToolCallInput(
                        turn=self._turn,
                        slot=slot,
                        tool_name=call.function.name,
                        tool_call_id=call.id,
                        arguments=call.function.arguments,
                        bound=bound,
                        approval=approval,
                        max_result_chars=policy.max_result_chars,
                        attempt=attempt,
                    ),
                    result_type=ToolMessage,
                    task_queue=policy.task_queue,
                    # the activity enforces the tool's own limit; past this, the worker is stuck
                    start_to_close_timeout=timedelta(
                        seconds=policy.timeout_seconds + TOOL_TIMEOUT_GRACE_SECONDS
                    ),
                    heartbeat_timeout=self._heartbeat_timeout(),
                    schedule_to_close_timeout=give_up_after(
                        policy.timeout_seconds + TOOL_TIMEOUT_GRACE_SECONDS,
                        self._spec.session.recovery_limit_seconds,
                    ),
                    retry_policy=LOST_WORK_RETRIES,
                    summary=call_summary(call),
                )
                break
            except ActivityError as error:
                cause = error.cause
                raised = isinstance(cause, ApplicationError) and cause.type == TOOL_RAISED
                if raised and attempt < policy.max_attempts:
                    # the tool's own failure: one of its attempts, then a durable wait
                    await workflow.sleep(
                        backoff(policy.initial_retry_seconds, MAX_TOOL_RETRY_SECONDS, attempt)
                    )
                    attempt += 1
                    continue
                if isinstance(cause, ApplicationError):
                    typed = cause.type and not raised  # ToolRaised messages name the type
                    detail = f"{cause.type}: {cause.message}" if typed else cause.message
                elif isinstance(cause, ActivityTimeout):
                    detail = self._gave_up_text("the call")
                else:
                    detail = str(cause or error)
                failed = error_result(call, f"Error calling '{call.function.name}': {detail}")
                return failed.model_copy(update={"approval": approval}), False
        if result.tool_call_id == call.id and result.approval == approval:
            return result, True
        # pair by position: the slot's id is the call's, whatever the activity echoed
        return result.model_copy(update={"tool_call_id": call.id, "approval": approval}), False

    def _heartbeat_timeout(self) -> timedelta:
        return timedelta(seconds=self._spec.session.heartbeat_timeout_seconds)

    def _gave_up_text(self, what: str) -> str:
        limit = self._spec.session.recovery_limit_seconds
        return (
            f"{what} was retried after lost workers for {limit:g} s without completing "
            "(session.recovery_limit_seconds)"
        )

    # --- ending ------------------------------------------------------------------------

    def _last_reply(self) -> AssistantMessage | ToolMessage | None:
        for message in reversed(self._messages):
            if isinstance(message, AssistantMessage | ToolMessage):
                return message
        return None

    def _end(
        self,
        status: Any,
        stop_reason: str,
        *,
        final: AssistantMessage | ToolMessage | None = None,
        error: str | None = None,
    ) -> AgentResult:
        if status == "failed":
            self._last_error = error
        elif self._last_error and self._last_error.startswith("structured output:"):
            error = self._last_error
        self._phase = status
        return AgentResult(
            status=status,
            stop_reason=stop_reason,
            final=final,
            structured_output=self._structured if final is self._reply else None,
            error=error,
            turns=self._turn,
            message_count=len(self._messages),
            usage=self._usage,
        )

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
            self._reject(f"{decision}: unreadable signal ({error})")
            return
        rejection = self._gate.record(signal, decision)
        if rejection:
            self._reject(rejection)

    @workflow.signal
    def send_message(self, raw: RawValue) -> None:
        try:
            message: str | UserMessage = decode(raw, str | UserMessage)
        except InvalidInput as error:
            self._reject(f"send_message: unreadable message ({error})")
            return
        if isinstance(message, str):
            message = UserMessage(content=message)
        size = len(message.content) if isinstance(message.content, str) else None
        limit = self._spec.session.max_message_chars
        if message.content in ("", []):
            self._reject("send_message: empty message")
        elif size is not None and size > limit:
            self._reject(f"send_message: {size} characters is over the limit of {limit}")
        elif self._ending is not None:
            self._reject("send_message: the session is ending")
        else:
            self._inbox.append(message.model_copy(update={"timestamp": _now_ms()}))

    @workflow.signal
    def end_session(self, raw: RawValue = NO_PAYLOAD) -> None:
        request = EndSessionSignal()
        if raw is not NO_PAYLOAD:
            try:
                request = decode(raw, EndSessionSignal | None) or request
            except InvalidInput as error:
                self._reject(f"end_session: unreadable signal ({error}); ending anyway")
        if self._ending is None:
            self._ending = request

    def _reject(self, text: str) -> None:
        workflow.logger.warning("signal changed nothing: %s", text)
        self._rejected = [*self._rejected, text][-MAX_REJECTED_SIGNALS_KEPT:]

    # --- queries ---------------------------------------------------------------------------

    @workflow.query
    def messages(self, from_index: int = 0) -> list[Message]:
        return self._messages[max(from_index, 0) :]

    @workflow.query
    def pending_approvals(self) -> list[PendingApproval]:
        return self._gate.undecided()

    @workflow.query
    def status(self) -> SessionStatus:
        return SessionStatus(
            phase=self._phase,
            turn=self._turn,
            message_count=len(self._messages),
            pending_approvals=self.pending_approvals(),
            usage=self._usage,
            last_error=self._last_error,
            rejected_signals=list(self._rejected),
            queued_messages=len(self._inbox),
            runs=self._runs,
        )
