"""The pure Session under random interleavings (hypothesis stateful testing).

Messages arrive at any time (mid-batch, while approvals wait, empty ones, after the
end was asked for), approvals are decided in any order (duplicates and unknown ids
included), a continue-as-new is offered at every step (the carried state round-trips
through JSON), the end, a turn's cancellation or a flush may be requested anywhere, the
model sometimes answers with a turn that needs rescue, guardrails deny at random, the
context is compacted as it grows, model calls fail (retryably or not) or are cancelled,
and every call id is ``call_0`` (providers reuse it). After every step: one result per
call, results in request order, no call run twice, nothing a sender sent lost.

The Session is driven as the workflow drives it: each step is one turn of the one
executor (``carry_out_step``), which asks for the next command and tells the Session
what came of it; ``MachineEffects`` only answers each command with what the test drew.
"""

from __future__ import annotations

import json
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from durable_agent._workflows.continuation import ContinuedInput
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from durable_agent._contracts.approvals import ApprovalSignal, TokenVerdict
from durable_agent._contracts.boundary import (
    AgentResult,
    CancelTurnSignal,
    EndSessionSignal,
    FlushSignal,
    GuardrailVerdict,
    ResolvedTool,
    ResolveToolsResult,
)
from durable_agent._errors import Failure
from durable_agent._session import (
    AwaitApprovals,
    CallModel,
    CheckApprovals,
    CheckGuardrails,
    Command,
    ContinueAsNew,
    DescribeCalls,
    ModelCancelled,
    ModelFailure,
    ModelOutcome,
    ModelReply,
    NotifyEscalation,
    Pause,
    RunTools,
    Session,
    SessionState,
    Summarise,
    VerifyTokens,
    WaitForMessage,
    carry_out_step,
)
from durable_agent._session.protocol import (
    CancelRequested,
    DecisionArrived,
    EndRequested,
    FlushRequested,
    MessageArrived,
    ToolsResolved,
)
from durable_agent._spec.document import AgentInput, AgentSpec, ModelSpec
from durable_agent._spec.tools import ToolPolicy
from durable_agent._wire.messages import AssistantMessage, ToolDefinition, ToolMessage, UserMessage
from durable_agent.testing import assistant_calls, assistant_text

TOOLS = {
    "lookup": ToolPolicy(),
    "wire": ToolPolicy(approval="always"),
    "audit": ToolPolicy(execution_mode="sequential"),
    "screen": ToolPolicy(approval="predicate"),
}
BATCHES = [["lookup", "wire"], ["audit", "lookup", "screen"], ["wire", "wire", "lookup"], []]
SPEC = AgentSpec(
    model=ModelSpec(
        name="machine",
        context={"budget_tokens": 250, "chars_per_token": 1, "when_over": "compact"},
    ),
    instructions="be brief",
    tools=[{"name": name} for name in TOOLS],
    guardrails={"input": ["screen_in"], "output": ["screen_out"]},
)
UNUSABLE = {
    "unknown tool": assistant_calls(("launch", {}), ids="call_0"),
    "broken JSON": AssistantMessage.model_validate(
        {"tool_calls": [{"id": "call_0", "function": {"name": "lookup", "arguments": "{"}}]}
    ),
    "empty": assistant_text(" "),
}


def resolved_tools() -> list[ResolvedTool]:
    return [
        ResolvedTool(
            definition=ToolDefinition(name=name, description=name, parameters={"type": "object"}),
            policy=policy,
            describes=name == "wire",  # its calls described for the people who approve them
        )
        for name, policy in TOOLS.items()
    ]


def model_reply(session: Session) -> AssistantMessage:
    """Tool calls once per user message (which ones: by the array's length), then text;
    every call id is ``call_0``."""
    messages = list(session.messages)
    last_user = max(i for i, m in enumerate(messages) if isinstance(m, UserMessage))
    if any(isinstance(m, ToolMessage) for m in messages[last_user:]):
        return assistant_text(f"answered after {len(messages)} messages")
    batch = BATCHES[len(messages) % len(BATCHES)]
    if not batch:
        return assistant_text("nothing to do")
    return assistant_calls(*[(name, {"n": k}) for k, name in enumerate(batch)], ids="call_0")


T = TypeVar("T")


class StillWaiting(Exception):
    """A wait the workflow would stay in (no decision yet, no message yet): the step
    ends here, and a later step asks for the command again, as the workflow's
    condition would be woken."""


def at_once(step: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never waits (the machine's effects answer at
    once): run to its end in one go."""
    try:
        step.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    raise AssertionError("the machine's effects never wait")


#: What a model call comes back as, when the test draws it.
OUTCOMES = ["reply", "reply", "reply", "reply", "unusable", "retryable", "fatal", "cancelled"]


class MachineEffects:
    """An ``Effects`` that answers each command with what the test drew for this step,
    and records what a check needs (calls run, continue-as-new asked)."""

    def __init__(self, machine: SessionMachine) -> None:
        self.machine = machine
        self.suggest = False
        self.allow = True
        self.outcome = "reply"
        self.unusable = "empty"
        self.continued = False

    @property
    def session(self) -> Session:
        return self.machine.session

    def now(self) -> datetime:
        return self.machine.now

    def continue_suggested(self) -> bool:
        return self.suggest

    def build_changed(self) -> bool:
        return False

    async def before(self, command: Command) -> None:
        event(type(command).__name__)

    async def finish(self, result: AgentResult) -> AgentResult:
        self.machine.finished = True
        return result

    async def continue_as_new(self, command: ContinueAsNew) -> None:
        self.continued = True

    async def call_model(self, command: CallModel) -> ModelOutcome:
        assert command.turn == self.machine.state.turn + 1
        return self._outcome(model_reply(self.session))

    def model_done(self, command: CallModel, outcome: ModelOutcome, sent: int) -> None:
        return None

    async def summarise(self, command: Summarise) -> ModelOutcome:
        assert 0 < command.until <= len(self.session.messages)
        return self._outcome(assistant_text("earlier: some talk"))

    def summary_done(self, command: Summarise, outcome: ModelOutcome, sent: int) -> None:
        return None

    def _outcome(self, reply: AssistantMessage) -> ModelOutcome:
        event(f"model: {self.outcome}")
        if self.outcome == "unusable":
            return ModelReply(UNUSABLE[self.unusable])
        if self.outcome == "retryable":
            return ModelFailure(Failure.MODEL_ATTEMPT_FAILED, "503 from the provider")
        if self.outcome == "fatal":
            return ModelFailure(Failure.PROVIDER_ERROR, "400: the request is malformed")
        if self.outcome == "cancelled" and self.session.view.loop.cancelling:
            return ModelCancelled()
        return ModelReply(reply)

    async def check_guardrails(
        self, command: CheckGuardrails
    ) -> tuple[GuardrailVerdict | None, str | None]:
        if self.allow:
            return GuardrailVerdict(allowed=True, by="g"), None
        return GuardrailVerdict(allowed=False, reason="no", by="g"), None

    async def pause(self, command: Pause) -> None:
        self.machine.now += command.delay

    async def check_approvals(self, command: CheckApprovals) -> list[bool]:
        return [c.function.arguments.endswith("2}") for c in command.calls]

    async def describe_calls(self, command: DescribeCalls) -> list[str]:
        assert {c.function.name for c in command.calls} == {"wire"}, "only its calls"
        return [f"send money: {c.function.arguments}" for c in command.calls]

    async def verify_tokens(self, command: VerifyTokens) -> list[TokenVerdict]:
        raise AssertionError("the machine signs no decision: nothing to verify")

    async def notify_escalation(self, command: NotifyEscalation) -> None:
        raise AssertionError("the machine's spec escalates to no one")

    async def await_approvals(self, command: AwaitApprovals) -> None:
        if not self.session.view.approvals_wait_over(command.ids, self.suggest):
            raise StillWaiting  # still waiting for people

    async def approvals_taken(self, command: AwaitApprovals) -> None:
        return None

    async def run_tools(self, command: RunTools) -> dict[int, ToolMessage]:
        results = {}
        for group in command.groups:
            if self.session.view.loop.cancelling:
                break  # cancelled: later groups never start
            for run in group:
                key = (command.turn, run.slot)
                assert key not in self.machine.executed, f"call {key} ran twice"
                self.machine.executed.add(key)
                results[run.slot] = ToolMessage(
                    tool_call_id=run.call.id,
                    content=f"{run.call.function.name} {run.call.function.arguments}",
                    tool_name=run.call.function.name,
                    approval=run.approval,
                )
        return results

    async def wait_for_message(self, command: WaitForMessage) -> bool:
        if self.session.view.idle_wait_over(self.suggest):
            return True
        self.machine.now += timedelta(seconds=1)  # idle: nothing until someone writes
        raise StillWaiting


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.state = SessionState()
        """The session's state, as the workflow carries it (the test reads it)."""
        self.session = Session(SPEC, self.state)
        resolved = ToolsResolved(ResolveToolsResult(tools=resolved_tools()))
        assert self.session.handle(resolved, self.now) is None
        self.session.start(AgentInput(spec=SPEC, message="hello"), self.now)
        self.accepted: list[str] = ["hello"]
        self.decided: set[str] = set()
        """Approval ids a decision was taken for (never to be asked again)."""
        self.rejected = 0
        self.executed: set[tuple[int, int]] = set()
        self.finished = False
        self.runs = 1
        self.effects = MachineEffects(self)

    # --- what people do ------------------------------------------------------------------

    @precondition(lambda self: not self.finished)
    @rule(text=st.sampled_from(["", "more please", "x" * 10, "and again"]))
    def send_message(self, text: str) -> None:
        before = len(self.state.requests.rejected_signals)
        rejection = self.session.handle(MessageArrived(UserMessage(content=text)), self.now)
        if rejection is None:
            self.accepted.append(text)
        else:
            assert len(self.state.requests.rejected_signals) == min(before + 1, 50)
            assert text == "" or self.state.requests.ending is not None

    @precondition(lambda self: not self.finished)
    @rule(
        pick=st.integers(0, 5),
        decision=st.sampled_from(["approved", "denied", "responded", "always"]),
    )
    def decide(self, pick: int, decision: Any) -> None:
        pending = self.session.view.approvals.undecided()
        known = [p.approval_id for p in self.state.approvals.pending]
        ids = [*known, "turn99-call9"]  # decided ones again, and one nobody asked for
        aid = ids[pick % len(ids)]
        signal = ApprovalSignal(approval_id=aid, by="machine")
        if decision == "responded":  # a person answers in the tool's place
            signal = signal.model_copy(update={"content": f"answered {aid}"})
        if decision == "always":  # and grants the tool's later calls
            signal, decision = signal.model_copy(update={"always": "tool"}), "approved"
        rejection = self.session.handle(DecisionArrived(signal, decision), self.now)
        if rejection is None and any(p.approval_id == aid for p in pending):
            self.decided.add(aid)
        if any(p.approval_id == aid for p in pending):
            assert rejection is None
        else:
            assert rejection is not None

    @precondition(lambda self: not self.finished)
    @rule()
    def end(self) -> None:
        self.session.handle(EndRequested(EndSessionSignal(by="machine")), self.now)

    @precondition(lambda self: not self.finished)
    @rule()
    def cancel(self) -> None:
        self.session.handle(CancelRequested(CancelTurnSignal(by="machine")), self.now)

    @precondition(lambda self: not self.finished)
    @rule()
    def flush(self) -> None:
        self.session.handle(FlushRequested(FlushSignal(by="machine")), self.now)

    # --- what the workflow does ----------------------------------------------------------

    @precondition(lambda self: not self.finished)
    @rule(
        suggest=st.booleans(),
        allow=st.sampled_from([True, True, True, True, False]),
        outcome=st.sampled_from(OUTCOMES),
        unusable=st.sampled_from(sorted(UNUSABLE)),
    )
    def advance(self, suggest: bool, allow: bool, outcome: str, unusable: str) -> None:
        """One turn of the executor: the next command, done as drawn, its outcome told."""
        effects = self.effects
        effects.suggest, effects.allow, effects.outcome, effects.unusable = (
            suggest,
            allow,
            outcome,
            unusable,
        )
        try:
            at_once(carry_out_step(self.session, effects))
        except StillWaiting:
            return
        if effects.continued:  # the carried state round-trips through JSON
            effects.continued = False
            carried = ContinuedInput(spec=SPEC, carried=self.session.for_next_run())
            again = ContinuedInput.model_validate_json(carried.model_dump_json())
            self.state = again.carried
            self.session = Session(again.spec, self.state)
            self.runs += 1

    @precondition(lambda self: not self.finished)
    @rule(outcomes=st.lists(st.sampled_from(OUTCOMES), min_size=5, max_size=5))
    def run_a_while(self, outcomes: list[str]) -> None:
        """A few ordinary steps in a row (so that sessions get somewhere between events),
        the model's calls answered as drawn."""
        for outcome in outcomes:
            if not self.finished:
                self.advance(suggest=False, allow=True, outcome=outcome, unusable="empty")

    @precondition(lambda self: self.finished)
    @rule(suggest=st.booleans())
    def an_ended_session_stays_ended(self, suggest: bool) -> None:
        self.effects.suggest = suggest
        result = at_once(carry_out_step(self.session, self.effects))
        assert isinstance(result, AgentResult), "an ended session only finishes again"

    # --- what must always hold -------------------------------------------------------------

    @invariant()
    def one_result_per_call_in_request_order(self) -> None:
        messages = list(self.session.messages)
        for i, message in enumerate(messages):
            if not (isinstance(message, AssistantMessage) and message.tool_calls):
                continue
            calls = message.tool_calls
            following = messages[i + 1 : i + 1 + len(calls)]
            if i + 1 == len(messages):
                continue  # the batch is still open
            assert len(following) == len(calls), "a batch lost results"
            for call, result in zip(calls, following, strict=True):
                assert isinstance(result, ToolMessage), "a result is missing"
                assert result.tool_name == call.function.name, "results out of request order"
                assert result.tool_call_id == call.id

    @invariant()
    def nothing_sent_is_lost(self) -> None:
        session = self.session
        delivered = [
            m.content
            for m in session.messages
            if isinstance(m, UserMessage) and m.mode != "tool"  # not a rescue's copy
        ] + [m.content for m in self.state.requests.inbox]
        checking = session._checking  # (inside: a message its input guardrails check)
        if checking is not None:
            delivered.append(checking.content)
        assert sorted(delivered) == sorted(self.accepted)

    @invariant()
    def flushes_and_rescues_land_between_exchanges(self) -> None:
        for message in self.session.messages:
            if message.role in ("flush", "resque"):
                event(f"array has {message.role}")

    @invariant()
    def approvals_wait_only_inside_a_batch(self) -> None:
        state = self.state
        if state.stage != "tools":
            assert not state.approvals.pending, "an approval outlived its batch"

    @invariant()
    def a_persons_answer_is_the_result(self) -> None:
        for message in self.session.messages:
            record = message.approval if isinstance(message, ToolMessage) else None
            if record is not None and record.decision == "responded":
                assert message.content.startswith("answered turn"), message.content
        state = self.state
        assert set(state.approvals.accepted) <= {p.approval_id for p in state.approvals.pending}, (
            "an answer leaked"
        )

    @invariant()
    def a_decision_is_never_asked_again(self) -> None:
        state = self.state
        for pending in state.approvals.pending:
            aid = pending.approval_id
            assert aid not in self.decided or aid in state.approvals.decisions, f"{aid} asked again"

    @invariant()
    def a_described_call_waits_with_its_description(self) -> None:
        for pending in self.state.approvals.pending:
            if pending.tool_name == "wire":
                assert pending.described_arguments == f"send money: {pending.arguments}"

    @invariant()
    def the_state_is_json(self) -> None:
        json.loads(self.state.model_dump_json())  # what continue-as-new carries


SessionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)
test_session_under_random_interleavings = SessionMachine.TestCase
