"""AgentWorkflow: the session. Its state is the message array.

A turn: the model activity -> the assistant message appended -> the whole tool
batch gated once -> approved calls run as activities (concurrently by default)
-> one slot per call filled in place -> slots appended in request order.
Signal handlers only record; the main loop decides.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent.contracts import (
        TOOL_DEFINITIONS_UNKNOWN,
        WORKFLOW_NAME,
        AgentResult,
        ApprovalCheckInput,
        ApprovalSignal,
        ModelCallInput,
        PendingApproval,
        Phase,
        ResolvedTool,
        ResolveToolsInput,
        ResolveToolsResult,
        SessionStatus,
        ToolCallInput,
    )
    from durable_agent.messages import (
        ApprovalRecord,
        AssistantMessage,
        Message,
        SystemMessage,
        ToolCall,
        ToolMessage,
        Usage,
        UserMessage,
    )
    from durable_agent.spec import AgentInput, AgentSpec
    from durable_agent.structured_output import parse_structured_output
    from workflows.turn_logic import (
        apply_overrides,
        approval_id,
        call_summary,
        denial_result,
        error_result,
        execution_groups,
        guardrail_denial,
        tools_digest,
    )

MAX_REJECTED_SIGNALS_KEPT = 50


def _now_ms() -> int:
    return int(workflow.now().timestamp() * 1000)


@workflow.defn(name=WORKFLOW_NAME)
class AgentWorkflow:
    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._turn = 0
        self._phase: Phase = "starting"
        self._pending: dict[str, PendingApproval] = {}
        self._decisions: dict[str, ApprovalRecord] = {}
        self._usage = Usage()
        self._last_error: str | None = None
        self._rejected: list[str] = []
        self._inbox: list[UserMessage] = []
        self._tools: dict[str, ResolvedTool] = {}
        self._digest: str | None = None
        self._send_definitions = False

    # --- run -------------------------------------------------------------------

    @workflow.run
    async def run(self, request: AgentInput) -> AgentResult:
        spec = request.spec
        await self._resolve_tools(spec)
        if spec.instructions:
            self._messages.append(SystemMessage(content=spec.instructions, timestamp=_now_ms()))
        self._messages.extend(request.history)
        if request.message is not None:
            first = request.message
            if isinstance(first, str):
                first = UserMessage(content=first)
            self._messages.append(first.model_copy(update={"timestamp": _now_ms()}))
        return await self._loop(spec)

    async def _resolve_tools(self, spec: AgentSpec) -> None:
        if not spec.tools:
            return
        resolved = await workflow.execute_activity(
            "resolve_tools",
            ResolveToolsInput(names=[t.name for t in spec.tools]),
            result_type=ResolveToolsResult,
            start_to_close_timeout=timedelta(seconds=30),
            summary=f"resolve_tools {', '.join(t.name for t in spec.tools)}",
        )
        if resolved.missing:
            raise ApplicationError(
                f"spec.tools names tools that no worker has loaded: {', '.join(resolved.missing)}",
                type="UnknownTool",
                non_retryable=True,
            )
        self._tools = apply_overrides(spec, resolved.tools)
        self._digest = tools_digest([t.definition for t in self._tools.values()])
        self._send_definitions = True  # the first call seeds the workers' cache

    async def _loop(self, spec: AgentSpec) -> AgentResult:
        model_calls = 0
        while True:
            self._deliver_queued_messages()
            if model_calls >= spec.stop.max_turns:
                return self._fail(
                    f"Agent loop exceeded {spec.stop.max_turns} iterations", stop_reason="max_turns"
                )
            assistant = await self._call_model(spec)
            model_calls += 1
            if assistant is None:
                return self._fail(self._last_error or "model call failed", stop_reason="error")
            if not assistant.tool_calls:
                if self._inbox:
                    continue  # a message arrived during the turn: answer it too
                return self._finish(spec, assistant)
            results = await self._run_batch(spec, assistant.tool_calls)
            self._messages.extend(results)
            stops = [r for r in results if r.tool_name in spec.stop.on_tools and not r.is_error]
            if stops:
                self._phase = "done"
                return self._result("done", f"stop_tool:{stops[0].tool_name}", final=stops[0])

    def _deliver_queued_messages(self) -> None:
        self._messages.extend(self._inbox)
        self._inbox.clear()

    # --- the model -------------------------------------------------------------

    async def _call_model(self, spec: AgentSpec) -> AssistantMessage | None:
        self._phase = "calling_model"
        model = spec.model
        while True:
            definitions = None
            if self._send_definitions:
                definitions = [t.definition for t in self._tools.values()]
            call = ModelCallInput(
                session_id=workflow.info().workflow_id,
                turn=self._turn + 1,
                endpoint=model.endpoint,
                model=model.name,
                options=model.options,
                reasoning=model.reasoning,
                stream=model.stream,
                output_schema=spec.output_schema,
                tools_digest=self._digest,
                tools=definitions,
                messages=list(self._messages),
            )
            try:
                assistant: AssistantMessage = await workflow.execute_activity(
                    "call_model",
                    call,
                    result_type=AssistantMessage,
                    start_to_close_timeout=timedelta(seconds=model.timeout_seconds),
                    heartbeat_timeout=timedelta(seconds=60) if model.stream else None,
                    retry_policy=RetryPolicy(
                        initial_interval=timedelta(seconds=model.initial_retry_seconds),
                        maximum_interval=timedelta(seconds=model.max_retry_seconds),
                        maximum_attempts=model.max_attempts,
                    ),
                    summary=f"call_model {model.name} turn {self._turn + 1}",
                )
            except ActivityError as error:
                cause = error.cause
                if (
                    isinstance(cause, ApplicationError)
                    and cause.type == TOOL_DEFINITIONS_UNKNOWN
                    and not self._send_definitions
                ):
                    self._send_definitions = True  # this worker lacks them: send them once
                    continue
                text = cause.message if isinstance(cause, ApplicationError) else str(error)
                self._last_error = text
                self._messages.append(
                    AssistantMessage(content="", is_error=True, error=text, timestamp=_now_ms())
                )
                return None
            self._send_definitions = False
            break
        self._turn += 1
        self._messages.append(assistant)
        if assistant.usage is not None:
            self._usage = self._usage + assistant.usage
        if assistant.is_error:
            self._last_error = assistant.error
        return assistant

    # --- a tool batch ----------------------------------------------------------

    async def _run_batch(self, spec: AgentSpec, calls: list[ToolCall]) -> list[ToolMessage]:
        slots: list[ToolMessage | None] = [None] * len(calls)
        approvals: dict[int, ApprovalRecord] = {}
        await self._gate(calls, slots, approvals)

        self._phase = "running_tools"
        approved = [k for k in range(len(calls)) if slots[k] is None]
        modes = [self._tools[calls[k].function.name].policy.execution_mode for k in approved]
        for group in execution_groups(approved, modes):
            results = await asyncio.gather(
                *(self._run_tool(spec, calls[k], k, approvals.get(k)) for k in group)
            )
            for k, result in zip(group, results, strict=True):
                slots[k] = result
        return [s for s in slots if s is not None]

    async def _gate(
        self,
        calls: list[ToolCall],
        slots: list[ToolMessage | None],
        approvals: dict[int, ApprovalRecord],
    ) -> None:
        """Decide the whole batch once, before anything runs."""
        needs_person: list[int] = []
        by_predicate: list[int] = []
        for k, call in enumerate(calls):
            resolved = self._tools.get(call.function.name)
            if resolved is None:
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
                summary=f"check_approvals {len(by_predicate)} calls",
            )
            needs_person.extend(
                k for k, needed in zip(by_predicate, verdicts, strict=True) if needed
            )
            needs_person.sort()
        if needs_person:
            await self._await_approvals(calls, needs_person, slots, approvals)

    async def _await_approvals(
        self,
        calls: list[ToolCall],
        needed: list[int],
        slots: list[ToolMessage | None],
        approvals: dict[int, ApprovalRecord],
    ) -> None:
        now = workflow.now()
        ids: dict[str, int] = {}
        for k in needed:
            call = calls[k]
            policy = self._tools[call.function.name].policy
            timeout = policy.approval_timeout_seconds
            aid = approval_id(self._turn, k)
            ids[aid] = k
            self._pending[aid] = PendingApproval(
                approval_id=aid,
                turn=self._turn,
                slot=k,
                tool_name=call.function.name,
                arguments=call.function.arguments,
                requested_at=now,
                deadline=now + timedelta(seconds=timeout) if timeout else None,
            )
        self._phase = "awaiting_approval"
        while not all(aid in self._decisions for aid in ids):
            deadlines = [
                p.deadline
                for aid, p in self._pending.items()
                if aid in ids and aid not in self._decisions and p.deadline is not None
            ]
            if not deadlines:
                await workflow.wait_condition(lambda: all(aid in self._decisions for aid in ids))
                break
            wait = max(min(deadlines) - workflow.now(), timedelta(0))
            try:
                await workflow.wait_condition(
                    lambda: all(aid in self._decisions for aid in ids), timeout=wait
                )
            except TimeoutError:
                self._apply_timeouts(ids)
        for aid, k in ids.items():
            record = self._decisions.pop(aid)
            del self._pending[aid]
            if record.decision == "denied":
                slots[k] = denial_result(calls[k], record)
            else:
                approvals[k] = record

    def _apply_timeouts(self, ids: dict[str, int]) -> None:
        now = workflow.now()
        for aid in ids:
            pending = self._pending[aid]
            if aid in self._decisions or pending.deadline is None or pending.deadline > now:
                continue
            policy = self._tools[pending.tool_name].policy
            self._decisions[aid] = ApprovalRecord(
                decision=policy.approval_timeout_decision,
                at=now,
                timed_out=True,
                reason="no decision before the approval deadline",
            )

    async def _run_tool(
        self, spec: AgentSpec, call: ToolCall, slot: int, approval: ApprovalRecord | None
    ) -> ToolMessage:
        resolved = self._tools[call.function.name]
        policy = resolved.policy
        bound = {
            param: spec.context[key] for param, key in resolved.bind.items() if key in spec.context
        }
        try:
            result: ToolMessage = await workflow.execute_activity(
                "run_tool",
                ToolCallInput(
                    session_id=workflow.info().workflow_id,
                    turn=self._turn,
                    slot=slot,
                    tool_name=call.function.name,
                    tool_call_id=call.id,
                    arguments=call.function.arguments,
                    bound=bound,
                ),
                result_type=ToolMessage,
                task_queue=policy.task_queue,
                start_to_close_timeout=timedelta(seconds=policy.timeout_seconds),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=policy.initial_retry_seconds),
                    maximum_attempts=policy.max_attempts,
                ),
                summary=call_summary(call),
            )
        except ActivityError as error:
            cause = error.cause
            if isinstance(cause, ApplicationError):
                detail = f"{cause.type}: {cause.message}" if cause.type else cause.message
            else:
                detail = str(cause or error)
            result = error_result(call, f"Error calling '{call.function.name}': {detail}")
        # pair by position: the slot's id is the call's, whatever the activity echoed
        return result.model_copy(update={"tool_call_id": call.id, "approval": approval})

    # --- ending ----------------------------------------------------------------

    def _finish(self, spec: AgentSpec, final: AssistantMessage) -> AgentResult:
        structured: Any = None
        error = final.error if final.is_error else None
        if spec.output_schema is not None and not final.is_error:
            parsed = parse_structured_output(final.content)
            structured, error = parsed.value, parsed.error
            if error:
                self._last_error = f"structured output: {error}"
        self._phase = "done"
        return self._result("done", "final_answer", final=final, structured=structured, error=error)

    def _fail(self, text: str, *, stop_reason: str) -> AgentResult:
        self._last_error = text
        self._phase = "failed"
        return self._result("failed", stop_reason, error=text)

    def _result(
        self,
        status: Any,
        stop_reason: str,
        *,
        final: AssistantMessage | ToolMessage | None = None,
        structured: Any = None,
        error: str | None = None,
    ) -> AgentResult:
        return AgentResult(
            status=status,
            stop_reason=stop_reason,
            final=final,
            structured_output=structured,
            error=error,
            turns=self._turn,
            message_count=len(self._messages),
            usage=self._usage,
        )

    # --- signals: record only ----------------------------------------------------

    @workflow.signal
    def approve(self, signal: ApprovalSignal) -> None:
        self._record_decision(signal, "approved")

    @workflow.signal
    def deny(self, signal: ApprovalSignal) -> None:
        self._record_decision(signal, "denied")

    def _record_decision(self, signal: ApprovalSignal, decision: Any) -> None:
        aid = signal.approval_id
        if aid not in self._pending:
            self._reject(f"{decision} {aid!r}: no pending approval has this id")
        elif aid in self._decisions:
            self._reject(f"{decision} {aid!r}: already {self._decisions[aid].decision}")
        else:
            self._decisions[aid] = ApprovalRecord(
                decision=decision, by=signal.by, at=workflow.now(), reason=signal.reason
            )

    @workflow.signal
    def send_message(self, message: str | UserMessage) -> None:
        if isinstance(message, str):
            message = UserMessage(content=message)
        if message.content in ("", []):
            self._reject("send_message: empty message")
            return
        self._inbox.append(message.model_copy(update={"timestamp": _now_ms()}))

    def _reject(self, text: str) -> None:
        workflow.logger.warning("signal changed nothing: %s", text)
        self._rejected = [*self._rejected, text][-MAX_REJECTED_SIGNALS_KEPT:]

    # --- queries -------------------------------------------------------------------

    @workflow.query
    def messages(self, from_index: int = 0) -> list[Message]:
        return self._messages[max(from_index, 0) :]

    @workflow.query
    def pending_approvals(self) -> list[PendingApproval]:
        return [p for aid, p in self._pending.items() if aid not in self._decisions]

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
        )
