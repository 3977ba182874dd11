"""The pure Session under random interleavings (hypothesis stateful testing).

Messages arrive at any time (mid-batch, while approvals wait, empty ones, after the
end was asked for), approvals are decided in any order (duplicates and unknown ids
included), a continue-as-new is offered at every step (the carried state round-trips
through JSON), the end may be requested anywhere, and every call id is ``call_0``
(providers reuse it). After every step: one result per call, results in request
order, no call run twice, nothing a sender sent lost.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from durable_agent.contracts import (
    ApprovalSignal,
    EndSessionSignal,
    ResolvedTool,
    ResolveToolsResult,
)
from durable_agent.messages import AssistantMessage, ToolMessage, UserMessage
from durable_agent.spec import AgentInput, AgentSpec, ModelSpec
from durable_agent.testing import assistant_calls, assistant_text
from durable_agent.tool_definition import ToolDefinition
from durable_agent.tools import ToolPolicy
from workflows.commands import (
    AwaitApprovals,
    CallModel,
    CheckApprovals,
    ContinueAsNew,
    Finish,
    Pause,
    RunTools,
    WaitForMessage,
)
from workflows.session import Session
from workflows.state import ContinuedInput, SessionState

TOOLS = {
    "lookup": ToolPolicy(),
    "wire": ToolPolicy(approval="always"),
    "audit": ToolPolicy(execution_mode="sequential"),
    "screen": ToolPolicy(approval="predicate"),
}
BATCHES = [["lookup", "wire"], ["audit", "lookup", "screen"], ["wire", "wire", "lookup"], []]
SPEC = AgentSpec(
    model=ModelSpec(name="machine"),
    instructions="be brief",
    tools=[{"name": name} for name in TOOLS],
)


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
        self.session = Session(SPEC, SessionState())
        assert self.session.tools_resolved(ResolveToolsResult(tools=resolved_tools())) is None
        self.session.start(AgentInput(spec=SPEC, message="hello"), self._ms())
        self.accepted: list[str] = ["hello"]
        self.rejected = 0
        self.executed: set[tuple[int, int]] = set()
        self.finished = False
        self.runs = 1

    def _ms(self) -> int:
        return int(self.now.timestamp() * 1000)

    # --- what people do ------------------------------------------------------------------

    @precondition(lambda self: not self.finished)
    @rule(text=st.sampled_from(["", "more please", "x" * 10, "and again"]))
    def send_message(self, text: str) -> None:
        before = len(self.session.state.rejected_signals)
        rejection = self.session.message_arrived(UserMessage(content=text), self._ms())
        if rejection is None:
            self.accepted.append(text)
        else:
            assert len(self.session.state.rejected_signals) == min(before + 1, 50)
            assert text == "" or self.session.state.ending is not None

    @precondition(lambda self: not self.finished)
    @rule(pick=st.integers(0, 5), decision=st.sampled_from(["approved", "denied"]))
    def decide(self, pick: int, decision: Any) -> None:
        pending = self.session.approvals.undecided()
        known = [p.approval_id for p in self.session.state.pending]
        ids = [*known, "turn99-call9"]  # decided ones again, and one nobody asked for
        aid = ids[pick % len(ids)]
        rejection = self.session.decision_arrived(
            ApprovalSignal(approval_id=aid, by="machine"), decision, self.now
        )
        if any(p.approval_id == aid for p in pending):
            assert rejection is None
        else:
            assert rejection is not None

    @precondition(lambda self: not self.finished)
    @rule()
    def end(self) -> None:
        self.session.end_requested(EndSessionSignal(by="machine"))

    # --- what the workflow does ----------------------------------------------------------

    @precondition(lambda self: not self.finished)
    @rule(suggest=st.booleans())
    def advance(self, suggest: bool) -> None:
        session = self.session
        command = session.next_command(suggested=suggest, now=self.now)
        if isinstance(command, Finish):
            self.finished = True
        elif isinstance(command, ContinueAsNew):
            carried = ContinuedInput(spec=SPEC, carried=session.for_next_run())
            again = ContinuedInput.model_validate_json(carried.model_dump_json())
            self.session = Session(again.spec, again.carried)
            self.runs += 1
        elif isinstance(command, CallModel):
            assert command.turn == session.state.turn + 1
            session.model_replied(model_reply(session))
        elif isinstance(command, Pause):
            self.now += command.delay
        elif isinstance(command, CheckApprovals):
            session.approvals_checked([c.function.arguments.endswith("2}") for c in command.calls])
        elif isinstance(command, AwaitApprovals):
            done = session.approvals.all_decided(command.ids)
            if done or session.interrupted(suggest):
                session.approvals_waited(self.now)
            # else: still waiting for people
        elif isinstance(command, RunTools):
            results = {}
            for group in command.groups:
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
            session.tools_finished(results)
        elif isinstance(command, WaitForMessage):
            self.now += timedelta(seconds=1)  # idle: nothing until someone writes

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
        delivered = [m.content for m in self.session.messages if isinstance(m, UserMessage)] + [
            m.content for m in self.session.state.inbox
        ]
        assert sorted(delivered) == sorted(self.accepted)

    @invariant()
    def the_state_is_json(self) -> None:
        json.loads(self.session.state.model_dump_json())  # what continue-as-new carries


SessionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)
test_session_under_random_interleavings = SessionMachine.TestCase
