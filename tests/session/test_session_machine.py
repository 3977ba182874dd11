"""The pure Session under random interleavings (hypothesis stateful testing).

Messages arrive at any time (mid-batch, while approvals wait, empty ones, after the
end was asked for), approvals are decided in any order (duplicates and unknown ids
included), a continue-as-new is offered at every step (the carried state round-trips
through JSON), the end, a turn's cancellation or a flush may be requested anywhere, the
model sometimes answers with a turn that needs rescue, guardrails deny at random, the
context is compacted as it grows, and every call id is ``call_0`` (providers reuse it).
After every step: one result per call, results in request order, no call run twice,
nothing a sender sent lost.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from durable_agent._workflows.continued_input import ContinuedInput
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from durable_agent._contracts._approval_contracts import ApprovalSignal
from durable_agent._contracts._contracts import (
    CancelTurnSignal,
    EndSessionSignal,
    FlushSignal,
    GuardrailVerdict,
    ResolvedTool,
    ResolveToolsResult,
)
from durable_agent._session import (
    AwaitApprovals,
    CallModel,
    CheckApprovals,
    CheckGuardrails,
    ContinueAsNew,
    Finish,
    Pause,
    RunTools,
    Session,
    SessionState,
    Summarise,
    WaitForMessage,
)
from durable_agent._spec._spec import AgentInput, AgentSpec, ModelSpec
from durable_agent._spec._tool_policy import ToolPolicy
from durable_agent._wire._messages import AssistantMessage, ToolMessage, UserMessage
from durable_agent._wire._tool_definition import ToolDefinition
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


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = datetime(2026, 1, 1, tzinfo=UTC)
        self.state = SessionState()
        """The session's state, as the workflow carries it (the test reads it)."""
        self.session = Session(SPEC, self.state)
        assert self.session.tools_resolved(ResolveToolsResult(tools=resolved_tools())) is None
        self.session.start(AgentInput(spec=SPEC, message="hello"), self.now)
        self.accepted: list[str] = ["hello"]
        self.decided: set[str] = set()
        """Approval ids a decision was taken for (never to be asked again)."""
        self.rejected = 0
        self.executed: set[tuple[int, int]] = set()
        self.finished = False
        self.runs = 1

    # --- what people do ------------------------------------------------------------------

    @precondition(lambda self: not self.finished)
    @rule(text=st.sampled_from(["", "more please", "x" * 10, "and again"]))
    def send_message(self, text: str) -> None:
        before = len(self.state.requests.rejected_signals)
        rejection = self.session.message_arrived(UserMessage(content=text), self.now)
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
        pending = self.session.undecided()
        known = [p.approval_id for p in self.state.approvals.pending]
        ids = [*known, "turn99-call9"]  # decided ones again, and one nobody asked for
        aid = ids[pick % len(ids)]
        signal = ApprovalSignal(approval_id=aid, by="machine")
        if decision == "responded":  # a person answers in the tool's place
            signal = signal.model_copy(update={"content": f"answered {aid}"})
        if decision == "always":  # and grants the tool's later calls
            signal, decision = signal.model_copy(update={"always": "tool"}), "approved"
        rejection = self.session.decision_arrived(signal, decision, self.now)
        if rejection is None and any(p.approval_id == aid for p in pending):
            self.decided.add(aid)
        if any(p.approval_id == aid for p in pending):
            assert rejection is None
        else:
            assert rejection is not None

    @precondition(lambda self: not self.finished)
    @rule()
    def end(self) -> None:
        self.session.end_requested(EndSessionSignal(by="machine"))

    @precondition(lambda self: not self.finished)
    @rule()
    def cancel(self) -> None:
        self.session.cancel_requested(CancelTurnSignal(by="machine"))

    @precondition(lambda self: not self.finished)
    @rule()
    def flush(self) -> None:
        self.session.flush_requested(FlushSignal(by="machine"))

    # --- what the workflow does ----------------------------------------------------------

    @precondition(lambda self: not self.finished)
    @rule(
        suggest=st.booleans(),
        allow=st.sampled_from([True, True, True, True, False]),
        unusable=st.sampled_from([None, None, None, *UNUSABLE]),
    )
    def advance(self, suggest: bool, allow: bool, unusable: str | None) -> None:
        session = self.session
        command = session.next_command(suggested=suggest, now=self.now)
        event(type(command).__name__)
        if isinstance(command, Finish):
            self.finished = True
        elif isinstance(command, ContinueAsNew):
            carried = ContinuedInput(spec=SPEC, carried=session.for_next_run())
            again = ContinuedInput.model_validate_json(carried.model_dump_json())
            self.state = again.carried
            self.session = Session(again.spec, self.state)
            self.runs += 1
        elif isinstance(command, CallModel):
            assert command.turn == self.state.turn + 1
            reply = UNUSABLE[unusable] if unusable else model_reply(session)
            session.model_replied(reply)
        elif isinstance(command, Summarise):
            assert 0 < command.until <= len(session.messages)
            session.summarised(assistant_text("earlier: some talk"), self.now)
        elif isinstance(command, CheckGuardrails):
            verdict = GuardrailVerdict(allowed=allow, reason=None if allow else "no", by="g")
            session.guardrails_checked(verdict)
        elif isinstance(command, Pause):
            self.now += command.delay
        elif isinstance(command, CheckApprovals):
            session.approvals_checked([c.function.arguments.endswith("2}") for c in command.calls])
        elif isinstance(command, AwaitApprovals):
            done = session.all_decided(command.ids)
            if done or session.interrupted(suggest):
                session.approvals_waited(self.now)
            # else: still waiting for people
        elif isinstance(command, RunTools):
            results = {}
            for group in command.groups:
                if session.cancelling:
                    break  # cancelled: later groups never start
                for run in group:
                    key = (command.turn, run.slot)
                    assert key not in self.executed, f"call {key} ran twice"
                    self.executed.add(key)
                    results[run.slot] = ToolMessage(
                        tool_call_id=run.call.id,
                        content=f"{run.call.function.name} {run.call.function.arguments}",
                        tool_name=run.call.function.name,
                        approval=run.approval,
                    )
            session.tools_finished(results, self.now)
        elif isinstance(command, WaitForMessage):
            self.now += timedelta(seconds=1)  # idle: nothing until someone writes

    @precondition(lambda self: not self.finished)
    @rule()
    def run_a_while(self) -> None:
        """A few ordinary steps in a row (so that sessions get somewhere between events)."""
        for _ in range(5):
            if not self.finished:
                self.advance(suggest=False, allow=True, unusable=None)

    @precondition(lambda self: self.finished)
    @rule(suggest=st.booleans())
    def an_ended_session_stays_ended(self, suggest: bool) -> None:
        assert isinstance(self.session.next_command(suggested=suggest, now=self.now), Finish)

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
    def the_state_is_json(self) -> None:
        json.loads(self.state.model_dump_json())  # what continue-as-new carries


SessionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)
test_session_under_random_interleavings = SessionMachine.TestCase
