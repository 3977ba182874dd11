"""A session carried out in the test's own process: no server, no HTTP, milliseconds
(``run_in_process``, and ``InProcessRun`` for this project's own tests).

``InProcessRun`` is an ``Effects`` for the one executor (``carry_out``), as the session
workflow's is: the Session decides, the executor tells it what came of each command,
and this class only does the commands with the same pure pieces the activities use:
request bodies from the real codecs, tools from a Registry (validated and invoked
as the tool activity does), predicates, descriptions and tokens as the workers answer
them. People's decisions come from a callback, and time moves only when a command
waits. Continue-as-new round-trips the carried state through JSON, as Temporal would.

What a test's approver may answer is checked here too (``decision_of``), in the words
every other entry point takes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from durable_agent._activities.approvals import answer_predicates, check_tokens, describe_calls
from durable_agent._activities.model import Outgoing, cache_key_secret
from durable_agent._activities.tools import _as_text
from durable_agent._agents import Agent, OutputT, RunResult
from durable_agent._contracts.approvals import (
    ApprovalCheckInput,
    ApprovalSignal,
    ApproverKeys,
    DecisionRequest,
    DescribeCallsInput,
    EscalationNotice,
    PendingApproval,
    TokenVerdict,
)
from durable_agent._contracts.boundary import (
    DEFAULT_TASK_QUEUE,
    AgentResult,
    EndSessionSignal,
    GuardrailInput,
    GuardrailVerdict,
    ModelSetup,
    ResolvedTool,
    ResolveToolsResult,
)
from durable_agent._errors import DurableAgentError, Failure, NotAllowed, NotRegistered
from durable_agent._session import (
    AwaitApprovals,
    CallModel,
    CheckApprovals,
    CheckGuardrails,
    Command,
    ContinueAsNew,
    DescribeCalls,
    ModelFailure,
    ModelOutcome,
    ModelReply,
    NotifyEscalation,
    Pause,
    RunTools,
    Session,
    SessionState,
    Summarise,
    ToolRun,
    VerifyTokens,
    WaitForMessage,
    carry_out,
    tool_error_result,
    tool_retry_delay,
)
from durable_agent._session.gate import RECORDED_DECISIONS
from durable_agent._session.model_call import (
    NOT_BUILT,
    extra_keys,
    fitted,
    from_endpoint,
    request_body,
    shaped,
    summary_request_body,
)
from durable_agent._session.protocol import (
    DeadlinesPassed,
    DecisionArrived,
    EndRequested,
    MessageArrived,
    ToolsResolved,
)
from durable_agent._spec.document import AgentInput, AgentSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._spec.tools import OwnerGates, ToolArgumentsError, ToolContext
from durable_agent._tools.hooks import HookContext, HookFailed, rewrite_reply, rewrite_request
from durable_agent._tools.registry import Registry, run_guardrails
from durable_agent._wire.codecs import Codec, built_by, hosted_by
from durable_agent._wire.messages import (
    AssistantMessage,
    Message,
    RecordedDecision,
    ToolMessage,
    UserMessage,
)
from durable_agent._workflows.continuation import ContinuedInput
from durable_agent.capabilities import Capabilities
from durable_agent.capabilities._admission import admission_problems
from durable_agent.temporal._plugin import with_agent_tools, with_agents

from ._models import FunctionModel, ModelFunction, ModelRequest

# What a test's approver may answer for a waiting call, in the words every other entry
# takes (``SessionHandle.approve``, ``DecisionRequest``, the CLI's commands, the
# gateway's routes): ``"approve"``, ``"deny"``, a whole ``DecisionRequest`` (an edit, a
# response in the tool's place, an "always"), or ``None`` (nobody decides).
#
# The approvals' records say what happened in the past tense (``"approved"``); a test
# that answers with those words is told the word to give instead, here, before anything
# reaches the session.

Verdict = Literal["approve", "deny"]
Answer = Verdict | DecisionRequest | None
"""What an approver answers for one waiting call."""

#: The words of an approval's record, and the word a caller gives for each.
_RECORDED = {"approved": "approve", "denied": "deny", "responded": "respond"}


class ApproverAnswerError(DurableAgentError, ValueError):
    """A test's approver answered what no decision is; the text names what to answer."""


def decision_of(answer: object, pending: PendingApproval) -> DecisionRequest | None:
    """The decision ``answer`` gives for ``pending`` (``None``: nobody decides);
    ``ApproverAnswerError`` saying what to answer instead."""
    call = f"{pending.tool_name} ({pending.approval_id})"
    if answer is None:
        return None
    if isinstance(answer, DecisionRequest):
        if answer.approval_id != pending.approval_id:
            raise ApproverAnswerError(
                f"the approver answered {pending.approval_id!r} with a decision for "
                f"{answer.approval_id!r}: give DecisionRequest(approval_id="
                "pending.approval_id, ...)"
            )
        return answer
    if answer in ("approve", "deny"):
        return DecisionRequest(approval_id=pending.approval_id, decision=answer)
    if answer == "respond":
        raise ApproverAnswerError(
            f"the approver answered 'respond' for {call} without the call's result: return "
            "DecisionRequest(approval_id=pending.approval_id, decision='respond', content=...)"
        )
    if isinstance(answer, str) and answer in _RECORDED:
        raise ApproverAnswerError(
            f"the approver answered {answer!r} for {call}: answer {_RECORDED[answer]!r} "
            f"(decisions are given as 'approve', 'deny' or a DecisionRequest; {answer!r} "
            "is how the approval's record tells it afterwards)"
        )
    raise ApproverAnswerError(
        f"the approver answered {answer!r} for {call}: answer 'approve', 'deny', a "
        "DecisionRequest, or None (nobody decides)"
    )


Model = Callable[[dict[str, Any]], AssistantMessage]
Approver = Callable[
    [PendingApproval], RecordedDecision | tuple[RecordedDecision, ApprovalSignal] | None
]
"""A verdict for a waiting call, or a verdict with its whole decision (an edit, a
response, an "always"), or ``None`` (nobody decides: its deadline passes)."""
START = datetime(2026, 1, 1, tzinfo=UTC)


class _ContinuedAsNew(DurableAgentError):
    """The run handed its state over; ``InProcessRun.run`` starts the next one with it."""

    def __init__(self, carried: ContinuedInput) -> None:
        super().__init__("continued as new")
        self.carried = carried


@dataclass
class InProcessRun:
    spec: AgentSpec
    registry: Registry
    model: Model = lambda body: AssistantMessage(content="", error="no model given")
    """Answers each request body (as a model server would)."""
    approver: Approver = lambda pending: "approved"
    continue_as_new_every: int | None = None
    """Offer a continue-as-new before every this many commands (``None``: never)."""
    between_commands: Callable[[InProcessRun], None] | None = None
    """Called before the Session is asked for each command: where a test sends messages
    or decisions mid-session, as people would between two workflow tasks."""
    session_id: str = "local-session"
    owner_gates: bool = False
    """Keep each tool's own gates as the worker does (the session's rules make them
    stricter, never looser), and fail a run whose waiting calls nobody decides (no
    deadline ends them). Off: the session's rules alone, for tests of those rules."""
    message_ids: bool = False
    """Give the array's messages stable ids (as a new session does)."""
    refused_decisions_fail: bool = False
    """Fail the run when the session refuses an approver's decision (a bad edit, a
    response without content), naming why; off: the call goes on waiting."""
    clock: datetime = START
    """The time the Session is told (it moves only when a command waits)."""
    keys: ApproverKeys = field(default_factory=ApproverKeys)
    """The public keys signed decisions are checked with (as a worker's)."""
    notices: list[EscalationNotice] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    executed: list[tuple[int, int, str, dict[str, Any]]] = field(default_factory=list)
    runs: int = 0
    answer: ModelFunction | None = None
    """Answers each request as a test's model does (its ``ModelRequest``, made from the
    request's own messages, tools and schema); when set, ``model`` is not asked."""
    capabilities: Capabilities | None = None
    """The worker's registrations each model call is checked against, as a worker
    checks it: the endpoint resolved, the request options its owner allows, provider
    file ids and the model server's URLs. ``None``: the endpoint as the spec gives it
    (a name: a Chat Completions endpoint on 127.0.0.1), with no owner's rules."""
    cache_secret: bytes = b"in-process"
    """The secret prompt cache keys are derived with, when no fleet secret
    (``$DURABLE_AGENT_CACHE_KEY_SECRET``) or endpoint key is set (as a worker's own)."""
    session: Session = field(init=False)
    _commands: int = 0
    _outgoing: Outgoing | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.capabilities is not None:  # the owner's rules for what leaves
            self._outgoing = Outgoing(self.capabilities)

    @property
    def now_ms(self) -> int:
        return int(self.clock.timestamp() * 1000)

    async def run(self, request: AgentInput) -> AgentResult:
        self.session = Session(self.spec, SessionState(message_ids=self.message_ids))
        self.runs = 1
        problem = self.session.handle(ToolsResolved(self._resolved(self.session)), self.clock)
        if problem:
            raise ValueError(problem)
        self.session.start(request, self.clock)
        while True:
            try:
                return await carry_out(self.session, self)
            except _ContinuedAsNew as handed_over:
                again = ContinuedInput.model_validate_json(handed_over.carried.model_dump_json())
                self.session = Session(again.spec, again.carried)
                self.runs += 1

    def _resolved(self, session: Session) -> ResolveToolsResult:
        """The spec's tools as a worker with ``registry`` describes them."""
        resolved, missing = [], []
        for name in session.view.tool_names_to_resolve():
            found = self.registry.get(name)
            if found is None:
                missing.append(name)
                continue
            resolved.append(
                ResolvedTool(
                    definition=found.definition,
                    policy=found.policy,
                    floor=OwnerGates.of(found.policy) if self.owner_gates else None,
                    bind=found.bind,
                    describes=found.describe is not None,
                )
            )
        registry = self.registry  # as the worker: predicates, notifiers and round hooks
        hooks = [
            h
            for h in self.spec.approval_hooks()
            if registry.hook(h) is None and not registry.round_hook(h)
        ]
        available = self.registry.names() if missing else []
        return ResolveToolsResult(
            tools=resolved, missing=missing, available=available, missing_hooks=hooks
        )

    # --- the executor's questions ---------------------------------------------------

    def now(self) -> datetime:
        return self.clock

    def continue_suggested(self) -> bool:
        """Asked first before each command: people act here, then every
        ``continue_as_new_every`` commands a fresh run is offered."""
        if self.between_commands is not None:
            self.between_commands(self)
        self._commands += 1
        every = self.continue_as_new_every
        return every is not None and self._commands % every == 0

    def build_changed(self) -> bool:
        return False

    async def before(self, command: Command) -> None:
        return None

    async def finish(self, result: AgentResult) -> AgentResult:
        return result

    async def continue_as_new(self, command: ContinueAsNew) -> None:
        raise _ContinuedAsNew(ContinuedInput(spec=self.spec, carried=self.session.for_next_run()))

    # --- what the activities do -----------------------------------------------------

    async def call_model(self, command: CallModel) -> ModelOutcome:
        """The request a worker would send, built by the same steps in the same order
        (``durable_agent._session.model_call``) with the same checks, answered by the test's
        model."""
        session = self.session
        view = session.view
        conversation = list(session.messages)
        try:
            setup, codec = await self._checked(view.model.setup())
            messages, schema = fitted(conversation, setup, codec)
            hooks = setup.hooks
            context = HookContext(session_id=self.session_id, turn=command.turn, agent=setup.agent)
            if hooks is not None and hooks.request:
                messages = await rewrite_request(self.registry, hooks.request, messages, context)
            prepared = shaped(messages, setup)
            if self._outgoing is not None:  # files fetched, provider parts guarded
                named, chain = view.model.setup().endpoint, self.session_id
                prepared = await self._outgoing.sendable(prepared, setup, codec, named, chain)
            body = request_body(
                codec,
                prepared,
                setup,
                conversation=conversation,
                schema=schema,
                session_id=self.session_id,
                cache_secret=cache_key_secret(setup.target, self.cache_secret),
            )
        except _Refused as refused:
            return ModelFailure(refused.failure, str(refused))
        except HookFailed as error:
            return ModelFailure(Failure.HOOK_FAILED, str(error))
        except NOT_BUILT as error:
            return ModelFailure(Failure.CONFIGURATION_ERROR, str(error))
        self.requests.append(body)
        # as the worker that shapes the request counts what it left out
        left_out = prepared.left_out if view.model.trimmed_by_workers else None
        stamp = {"timestamp": self.now_ms, "agent_name": setup.agent}
        reply = from_endpoint(self._answer(body, prepared, setup, schema), setup)
        reply = reply.model_copy(update=stamp)
        if reply.is_error and reply.refusal is None:
            return ModelFailure(Failure.MODEL_ATTEMPT_FAILED, f"model turn failed: {reply.error}")
        if hooks is not None and hooks.reply:  # as the worker: the reply as recorded
            try:
                reply = await rewrite_reply(self.registry, hooks.reply, reply, context)
            except HookFailed as error:
                return ModelFailure(Failure.HOOK_FAILED, str(error))
        return ModelReply(reply, left_out=left_out)

    def _answer(
        self,
        body: dict[str, Any],
        prepared: list[Message],
        setup: ModelSetup,
        schema: dict[str, Any] | None,
    ) -> AssistantMessage:
        if self.answer is None:
            return self.model(body)
        return self.answer(ModelRequest.of_call(prepared, setup.tools, schema, body))

    async def _checked(self, setup: ModelSetup) -> tuple[ModelSetup, Codec]:
        """The setup with its endpoint resolved and the codec of its wire, checked as a
        worker checks them at every call: an endpoint the owner registered or allows,
        a wire this registry speaks, only the request options the owner allows."""
        named = setup.endpoint
        if self.capabilities is None:  # no owner: the endpoint as the spec gives it
            endpoint = named if not isinstance(named, str) else _ANY_ENDPOINT
        else:
            try:
                endpoint = await self.capabilities.endpoint(named)
            except (NotRegistered, NotAllowed) as error:
                raise _Refused(str(error)) from None
        try:
            codec = self.registry.codec(endpoint.api)
        except ValueError as error:
            raise _Refused(str(error)) from None
        if self.capabilities is not None:
            built = built_by(codec)
            problems = self.capabilities.option_problems(named, extra_keys(setup), built)
            options, wrong = self.capabilities.hosted_tools_for(
                named, setup.options, hosted_by(codec)
            )
            problems += wrong
            if problems:
                raise _Refused(f"model.options.{problems[0]}")
            setup = setup.model_copy(update={"options": options})
        return setup.model_copy(update={"endpoint": endpoint}), codec

    def model_done(self, command: CallModel, outcome: ModelOutcome, sent: int) -> None:
        return None

    async def summarise(self, command: Summarise) -> ModelOutcome:
        session = self.session
        prompt = self.spec.model.context.summary_prompt
        try:
            setup, codec = await self._checked(session.view.model.setup("summary"))
            messages = list(session.messages)
            asked, body = summary_request_body(
                codec, messages, setup, until=command.until, prompt=prompt
            )
        except _Refused as refused:
            return ModelFailure(refused.failure, str(refused))
        except NOT_BUILT as error:
            return ModelFailure(Failure.CONFIGURATION_ERROR, str(error))
        self.requests.append(body)
        reply = self._answer(body, asked, setup, None)
        if reply.is_error or not reply.content.strip():
            return ModelFailure(Failure.MODEL_ATTEMPT_FAILED, "no summary")
        return ModelReply(reply)

    def summary_done(self, command: Summarise, outcome: ModelOutcome, sent: int) -> None:
        return None

    async def check_guardrails(
        self, command: CheckGuardrails
    ) -> tuple[GuardrailVerdict | None, str | None]:
        request = GuardrailInput(kind=command.kind, names=command.names, text=command.text)
        return await run_guardrails(self.registry, request), None

    async def pause(self, command: Pause) -> None:
        self.clock += command.delay

    async def check_approvals(self, command: CheckApprovals) -> list[bool]:
        pairs = [(c.function.name, c.function.arguments) for c in command.calls]
        asked = ApprovalCheckInput(calls=pairs, predicates=command.predicates)
        return answer_predicates(self.registry, asked)

    async def describe_calls(self, command: DescribeCalls) -> list[str]:
        pairs = [(c.function.name, c.function.arguments) for c in command.calls]
        return describe_calls(self.registry, DescribeCallsInput(calls=pairs))

    async def verify_tokens(self, command: VerifyTokens) -> list[TokenVerdict]:
        return check_tokens(self.keys, self.session_id, command.checks)

    async def notify_escalation(self, command: NotifyEscalation) -> None:
        self.notices.append(command.notice)

    async def await_approvals(self, command: AwaitApprovals) -> None:
        """The approver decides each waiting call; those it leaves wait out their
        deadline (time moves to it) and take their tool's default."""
        session, ids = self.session, command.ids
        for pending in [p for p in session.view.approvals.undecided() if p.approval_id in ids]:
            if pending.approval_id in session.view.approvals.decided():
                continue  # decided meanwhile (a standing grant made by an earlier decision)
            decision = self.approver(pending)
            problem = None
            if isinstance(decision, tuple):  # a decision with more than a verdict
                problem = session.handle(DecisionArrived(decision[1], decision[0]), self.clock)
            elif decision is not None:
                signal = ApprovalSignal(approval_id=pending.approval_id, by="test")
                problem = session.handle(DecisionArrived(signal, decision), self.clock)
            if problem is not None and self.refused_decisions_fail:
                raise ApproverAnswerError(
                    f"the session refused the approver's decision on {pending.tool_name} "
                    f"({pending.approval_id}): {problem}"
                )
        view = session.view
        if view.approvals_wait_over(ids, False):
            return
        deadline = view.approvals.next_deadline(ids)
        if deadline is None:
            if self.owner_gates:
                waiting = [f"{p.tool_name}({p.arguments})" for p in view.approvals.undecided()]
                raise DurableAgentError(
                    f"calls wait for a person and have no deadline: {', '.join(waiting)}; "
                    "give an approver that decides them"
                )
            return
        self.clock = max(self.clock, deadline)
        session.handle(DeadlinesPassed(ids), self.clock)
        while view.approvals.defaults_left:  # (one page per workflow task in the workflow)
            session.handle(DeadlinesPassed(ids), self.clock)

    async def approvals_taken(self, command: AwaitApprovals) -> None:
        return None

    async def run_tools(self, command: RunTools) -> dict[int, ToolMessage]:
        results = {}
        for group in command.groups:  # in order; a group's calls are independent
            if self.session.view.loop.cancelling:
                break  # as the workflow: later groups do not start
            for run in group:
                results[run.slot] = await self._run_tool(command.turn, run)
        return results

    async def wait_for_message(self, command: WaitForMessage) -> bool:
        """No one writes again: an idle timeout passes, or the session is ended."""
        if command.timeout is not None:
            self.clock += command.timeout
            return False
        ended = EndSessionSignal(by="test", reason="nothing left to say")
        self.session.handle(EndRequested(ended), self.clock)
        return True

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
                self.clock += delay
                attempt += 1
                continue
            return result(_as_text(output)).model_copy(update={"usage": context.usage})

    # --- what people do -------------------------------------------------------------

    def send(self, text: str) -> str | None:
        return self.session.handle(MessageArrived(UserMessage(content=text)), self.clock)

    def elapse(self, seconds: float) -> None:
        self.clock += timedelta(seconds=seconds)


class _Refused(DurableAgentError):
    """A model call a worker would refuse as configured (never sent, never retried)."""

    failure = Failure.CONFIGURATION_ERROR


async def run_in_process(
    agent: Agent[OutputT],
    message: str,
    *,
    model: FunctionModel | ModelFunction,
    approver: Callable[[PendingApproval], Answer] = lambda pending: None,
    capabilities: Capabilities | None = None,
    registry: Registry | None = None,
) -> RunResult[OutputT]:
    """Run ``agent`` on ``message`` to its answer in this process, with the rules a
    worker applies and no server: the worker's admission of its spec (``capabilities``:
    your worker's registrations, whose rules each model call is checked against as a
    worker checks it; by default, any endpoint and MCP server the agent names; and
    ``registry``: your worker's ``Registry``, with its tools, tool kinds, hooks and
    wire codecs, which the agent's own tools join), each request built as a worker
    builds it, the owner's gates on each tool, the session's approvals asked of
    ``approver`` (for each waiting call ``"approve"``, ``"deny"``, a whole
    ``DecisionRequest`` to edit, respond or approve "always", or ``None``: nobody
    decides, and its deadline passes), guardrails and hooks, rescue, budgets. ``model``
    answers each request (a ``TestModel``, a ``FunctionModel`` or its function); it is
    not started. The typed answer with the run's ``messages`` (the whole array, as the
    session's ``messages`` query gives it), or ``AgentRunError`` saying how the run
    ended without one."""
    owned = Registry()  # yours joined by the agent's tools, never changing yours
    if registry is not None:
        owned.merge(registry)
    registry = with_agent_tools(owned, [agent])
    spec = agent.spec()
    one_reply = spec.session.model_copy(update={"end_after_reply": True})  # as ``run`` does
    spec = spec.model_copy(update={"session": one_reply})
    owner = with_agents(capabilities or _ANY_MODEL, [agent])
    problems = await admission_problems(spec, owner, DEFAULT_TASK_QUEUE, registry)
    if problems:
        raise NotAllowed("the worker would refuse this agent: " + "; ".join(problems))
    run = InProcessRun(
        spec=spec,
        registry=registry,
        answer=model._function if isinstance(model, FunctionModel) else model,
        capabilities=None if capabilities is None else owner,
        approver=_as_recorded(approver),
        session_id=f"in-process-{agent.name}",
        owner_gates=True,
        message_ids=True,
        refused_decisions_fail=True,
    )
    result = await run.run(AgentInput(spec=spec, message=message))
    typed = agent.output_of(run.session_id, result)
    return dataclasses.replace(typed, messages=list(run.session.messages))


def _as_recorded(approver: Callable[[PendingApproval], Answer]) -> Approver:
    """``approver``, answering in the words a caller gives (``"approve"``, ``"deny"``,
    a ``DecisionRequest``), as the verdicts and signals the Session takes."""

    def decide(pending: PendingApproval) -> tuple[RecordedDecision, ApprovalSignal] | None:
        decision = decision_of(approver(pending), pending)
        if decision is None:
            return None
        signal = decision.as_signal()
        if signal.by is None:
            signal = signal.model_copy(update={"by": "test"})
        return RECORDED_DECISIONS[decision.decision], signal

    return decide


#: What the agent names is what a worker registered, unless given your own.
_ANY_ENDPOINT = ProviderEndpoint(base_url="http://127.0.0.1:9/v1", api_key_env=None)
_ANY_MODEL = Capabilities(every_model=_ANY_ENDPOINT)
