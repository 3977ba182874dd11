"""Run the pure Session in-process: no server, no HTTP, milliseconds a session.

The driver does what the workflow and its activities do with each command, with the
same pure pieces: request bodies from the real codecs, tools from a ToolRegistry
(validated and invoked as the tool activity does), the tool-failure rules of
``workflows.turn_logic``, approvals decided by a callback, time advanced by hand.
Continue-as-new round-trips the carried state through JSON, as Temporal would.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, assert_never

from durable_agent.activities.approvals import answer_predicates, check_tokens, describe_calls
from durable_agent.activities.tools import _as_text
from durable_agent.workflows.continued_input import ContinuedInput

from durable_agent.core import (
    MODEL_ATTEMPT_FAILED,
    AgentInput,
    AgentResult,
    AgentSpec,
    ApprovalCheckInput,
    ApprovalSignal,
    ApproverKeys,
    AssistantMessage,
    DescribeCallsInput,
    EndSessionSignal,
    EscalationNotice,
    GuardrailInput,
    PendingApproval,
    ProviderEndpoint,
    RecordedDecision,
    ResolvedTool,
    ResolveToolsResult,
    ToolArgumentsError,
    ToolContext,
    ToolMessage,
    UserMessage,
    as_seen_by,
    options_for_call,
    summary_request,
)
from durable_agent.core.codecs import build_request
from durable_agent.session import (
    AwaitApprovals,
    CallModel,
    CheckApprovals,
    CheckGuardrails,
    ContinueAsNew,
    DescribeCalls,
    Finish,
    NotifyEscalation,
    Pause,
    RunTools,
    Session,
    SessionState,
    Summarise,
    ToolRun,
    VerifyTokens,
    WaitForMessage,
    tool_error_result,
    tool_retry_delay,
)
from durable_agent.session._commands import Command
from durable_agent.tools import ToolRegistry, run_guardrails

Model = Callable[[dict[str, Any]], AssistantMessage]
Approver = Callable[
    [PendingApproval], RecordedDecision | tuple[RecordedDecision, ApprovalSignal] | None
]
"""A verdict for a waiting call, or a verdict with its whole decision (an edit, a
response, an "always"), or ``None`` (nobody decides: its deadline passes)."""
START = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class SessionDriver:
    spec: AgentSpec
    registry: ToolRegistry
    model: Model
    approver: Approver = lambda pending: "approved"
    continue_as_new_every: int | None = None
    """Offer a continue-as-new after this many commands (``None``: never)."""
    on_command: Callable[[SessionDriver], Awaitable[None]] | None = None
    """Called before each command (to send messages or decisions mid-session)."""
    session_id: str = "local-session"
    now: datetime = START
    keys: ApproverKeys = field(default_factory=ApproverKeys)
    """The public keys signed decisions are checked with (as a worker's)."""
    notices: list[EscalationNotice] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    executed: list[tuple[int, int, str, dict[str, Any]]] = field(default_factory=list)
    runs: int = 0
    session: Session = field(init=False)

    @property
    def now_ms(self) -> int:
        return int(self.now.timestamp() * 1000)

    async def run(self, request: AgentInput) -> AgentResult:
        self.session = Session(self.spec, SessionState())
        self.runs = 1
        self._resolve_tools()
        self.session.start(request, self.now)
        commands = 0
        while True:
            if self.on_command is not None:
                await self.on_command(self)
            commands += 1
            every = self.continue_as_new_every
            suggested = every is not None and commands % every == 0
            command = self.session.next_command(suggested=suggested, now=self.now)
            if isinstance(command, Finish):
                return command.result
            await self.carry_out(command)

    def _resolve_tools(self) -> None:
        resolved, missing = [], []
        names = [t.name for t in self.spec.tools]
        if self.session.swarm is not None:
            names = list(dict.fromkeys([*names, *self.session.swarm.tool_names()]))
        for name in names:
            found = self.registry.get(name)
            if found is None:
                missing.append(name)
            else:
                resolved.append(
                    ResolvedTool(
                        definition=found.definition,
                        policy=found.policy,
                        bind=found.bind,
                        describes=found.describe is not None,
                    )
                )
        hooks = [h for h in self.spec.approval_hooks() if self.registry.hook(h) is None]
        result = ResolveToolsResult(tools=resolved, missing=missing, missing_hooks=hooks)
        problem = self.session.toolbox.resolved(result)
        if problem:
            raise ValueError(problem)

    async def carry_out(self, command: Command) -> None:
        session = self.session
        match command:
            case ContinueAsNew():
                carried = ContinuedInput(spec=self.spec, carried=session.for_next_run())
                again = ContinuedInput.model_validate_json(carried.model_dump_json())
                self.session = Session(again.spec, again.carried)
                self.runs += 1
            case CallModel():
                self._call_model()
            case Summarise():
                self._summarise(command.until)
            case CheckGuardrails():
                request = GuardrailInput(kind=command.kind, names=command.names, text=command.text)
                session.guardrails_checked(await run_guardrails(self.registry, request))
            case Pause():
                self.now += command.delay
            case CheckApprovals():
                pairs = [(c.function.name, c.function.arguments) for c in command.calls]
                asked = ApprovalCheckInput(calls=pairs, predicates=command.predicates)
                session.batch.approvals_checked(answer_predicates(self.registry, asked))
            case DescribeCalls():
                pairs = [(c.function.name, c.function.arguments) for c in command.calls]
                session.batch.calls_described(
                    describe_calls(self.registry, DescribeCallsInput(calls=pairs))
                )
            case VerifyTokens():
                verdicts = check_tokens(self.keys, self.session_id, command.checks)
                session.decisions.tokens_checked(verdicts, self.now)
            case NotifyEscalation():
                self.notices.append(command.notice)
                session.decisions.escalation_sent()
            case AwaitApprovals():
                self._decide(command.ids)
                session.batch.approvals_waited(self.now)
            case RunTools():
                results = {}
                for group in command.groups:  # in order; a group's calls are independent
                    if session.state.cancel is not None:
                        break  # as the workflow: later groups do not start
                    for run in group:
                        results[run.slot] = await self._run_tool(command.turn, run)
                session.tools_finished(results, self.now)
            case WaitForMessage():
                if command.timeout is not None:
                    self.now += command.timeout
                    session.idle_timed_out()
                else:
                    session.requests.end_requested(
                        EndSessionSignal(by="driver", reason="nothing left to say")
                    )
            case Finish():
                raise AssertionError("run() returns on Finish")
            case _:  # mypy proves every command has its case
                assert_never(command)

    # --- what the activities do --------------------------------------------------------

    def _summarise(self, until: int) -> None:
        session, model = self.session, self.spec.model
        messages = summary_request(session.messages, until, model.context.summary_prompt)
        name = model.context.summary_model or model.name
        body = build_request(_api(model.endpoint), messages, model=name, options=model.options)
        self.requests.append(body)
        reply = self.model(body)
        if reply.is_error or not reply.content.strip():
            session.model_failed(MODEL_ATTEMPT_FAILED, "no summary", None, self.now)
        else:
            session.summarised(reply, self.now)

    def _call_model(self) -> None:
        session = self.session
        setup = session.model_setup()
        messages = list(session.messages)
        if setup.agent is not None:
            messages = as_seen_by(messages, setup.agent, setup.instructions)
        body = build_request(
            _api(setup.endpoint),
            messages,
            model=setup.model,
            tools=setup.tools,
            options=options_for_call(setup.options, session.messages),
            output_schema=setup.output_schema,
            reasoning=setup.reasoning,
            stream=False,
            context=setup.context,
        )
        self.requests.append(body)
        stamp = {"timestamp": self.now_ms, "agent_name": setup.agent}
        reply = self.model(body).model_copy(update=stamp)
        if reply.is_error and reply.refusal is None:
            session.model_failed(
                MODEL_ATTEMPT_FAILED, f"model turn failed: {reply.error}", None, self.now
            )
        else:
            session.model_replied(reply)

    def _decide(self, ids: list[str]) -> None:
        session = self.session
        for pending in [p for p in session.approvals.undecided() if p.approval_id in ids]:
            if pending.approval_id in session.state.decisions:
                continue  # decided meanwhile (a standing grant made by an earlier decision)
            decision = self.approver(pending)
            if isinstance(decision, tuple):  # a decision with more than a verdict
                session.decisions.decision_arrived(decision[1], decision[0], self.now)
            elif decision is not None:
                signal = ApprovalSignal(approval_id=pending.approval_id, by="driver")
                session.decisions.decision_arrived(signal, decision, self.now)
        deadline = session.approvals.next_deadline(ids)
        if not session.approvals.all_decided(ids) and deadline is not None:
            self.now = max(self.now, deadline)  # nobody decided: the deadline passes
            while session.approvals.apply_defaults(ids, session.batch.timeout_decision, self.now):
                pass  # (a page a task in the workflow)

    async def _run_tool(self, turn: int, run: ToolRun) -> ToolMessage:
        call = run.call
        found = self.registry.get(call.function.name)

        def result(content: str, is_error: bool | None = None) -> ToolMessage:
            return ToolMessage(
                tool_call_id=call.id,
                content=content,
                tool_name=call.function.name,
                is_error=is_error,
                approval=run.approval,
                timestamp=self.now_ms,
                agent_name=run.agent_name,
            )

        if found is None:
            return result(f"Tool not registered: {call.function.name}", True)
        try:
            arguments = found.validate_arguments(call.function.arguments, run.bound)
        except ToolArgumentsError as error:
            return result(str(error), True)
        attempt = 1
        while True:
            context = ToolContext(
                session_id=self.session_id,
                turn=turn,
                slot=run.slot,
                tool_call_id=call.id,
                idempotency_key=f"{self.session_id}:{turn}:{run.slot}",
                attempt=attempt,
                context=run.bound,
            )
            self.executed.append((turn, run.slot, call.function.name, arguments))
            try:
                output = await found.invoke(arguments, context)
            except Exception as error:
                delay = tool_retry_delay(run.tool.policy, attempt)
                if delay is None:
                    failed = tool_error_result(call, f"{type(error).__name__}: {error}")
                    return failed.model_copy(update={"approval": run.approval})
                self.now += delay
                attempt += 1
                continue
            return result(_as_text(output)).model_copy(update={"usage": context.usage})

    # --- what people do ----------------------------------------------------------------

    def send(self, text: str) -> str | None:
        return self.session.requests.message_arrived(UserMessage(content=text), self.now)

    def elapse(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _api(endpoint: ProviderEndpoint | str) -> str:
    """The wire API of an endpoint the driver plays (a registered name speaks Chat
    Completions here, as the driver has no worker to look it up)."""
    return "chat" if isinstance(endpoint, str) else endpoint.api
