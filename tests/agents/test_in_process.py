"""An agent's loop in the test's own process (``run_in_process``): no server, the
rules a worker applies (admission, the owner's gates, approvals by callback), answered
by a ``FunctionModel`` or a ``TestModel``."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from durable_agent import (
    Agent,
    AssistantMessage,
    DurableAgentError,
    PendingApproval,
    ToolMessage,
    tool,
)
from durable_agent.capabilities import Capabilities
from durable_agent.temporal import DecisionRequest
from durable_agent.testing import (
    AgentTestEnvironment,
    FunctionModel,
    ModelRequest,
    TestModel,
    assistant_calls,
    assistant_text,
    run_in_process,
)

refunded: list[str] = []


@tool(approval="always")
def refund(order: str) -> str:
    """Refund an order (a person approves each one)."""
    refunded.append(order)
    return f"refunded {order}"


class Outcome(BaseModel):
    order: str
    refunded: bool


support = Agent(
    name="support",
    model="openai:gpt-4o-mini",
    instructions="Refund what the customer asks.",
    tools=[refund],
    output_type=Outcome,
)


def script(request: ModelRequest) -> AssistantMessage:
    """Refund once, then say how it went (by what the tool answered)."""
    done = [m for m in request.since_last_user() if m.role == "tool"]
    if not done:
        return assistant_calls(("refund", {"order": "o-1"}))
    ran = "refunded" in str(done[-1].content) and not done[-1].is_error
    return assistant_text(Outcome(order="o-1", refunded=ran).model_dump_json())


async def test_a_gated_call_asks_the_approver_and_the_answer_is_typed() -> None:
    refunded.clear()
    asked: list[PendingApproval] = []

    def approver(pending: PendingApproval) -> str:
        asked.append(pending)
        return "approve"

    run = await run_in_process(
        support, "Refund o-1", model=FunctionModel(script), approver=approver
    )
    assert run.output == Outcome(order="o-1", refunded=True)
    assert [p.tool_name for p in asked] == ["refund"] and refunded == ["o-1"]


async def test_a_denied_call_does_not_run() -> None:
    refunded.clear()
    run = await run_in_process(support, "Refund o-1", model=script, approver=lambda pending: "deny")
    assert run.output == Outcome(order="o-1", refunded=False)
    assert refunded == [], "the denied call never ran"


async def test_what_the_worker_would_refuse_is_refused_before_the_model_is_asked() -> None:
    asked: list[ModelRequest] = []

    def never(request: ModelRequest) -> AssistantMessage:
        asked.append(request)
        return assistant_text("{}")

    elsewhere = Agent(name="elsewhere", model="billing:gpt-4o", tools=[refund])
    registered = Capabilities(models={})  # your worker's registries: no such endpoint
    try:
        await run_in_process(elsewhere, "hi", model=never, capabilities=registered)
    except DurableAgentError as error:
        refused = str(error)
    else:
        raise AssertionError("admitted")
    assert "model.endpoint" in refused and "billing" in refused
    assert asked == [], "no model call"


async def test_the_test_model_answers_in_process() -> None:
    refunded.clear()
    run = await run_in_process(
        support, "Refund o-1", model=TestModel(), approver=lambda pending: "approve"
    )
    assert isinstance(run.output, Outcome)
    assert len(refunded) == 1, "the test model calls each tool once"


async def test_a_call_nobody_decides_says_so_rather_than_waiting() -> None:
    refunded.clear()
    try:
        await run_in_process(support, "Refund o-1", model=script)
    except DurableAgentError as error:
        said = str(error)
    else:
        raise AssertionError("it went on")
    assert "refund" in said and "give an approver" in said and refunded == []


async def test_a_spec_cannot_loosen_the_owners_gate() -> None:
    """The agent's own rules allow every refund, but the tool's owner gates each call:
    as on a worker, a person is asked all the same."""
    refunded.clear()
    loose = Agent(
        name="loose",
        model="openai:gpt-4o-mini",
        tools=[refund],
        output_type=Outcome,
        settings={"approvals": {"rules": [{"tools": ["refund"], "action": "allow"}]}},
    )
    asked: list[str] = []

    def approver(pending: PendingApproval) -> str:
        asked.append(pending.tool_name)
        return "deny"

    run = await run_in_process(loose, "Refund o-1", model=script, approver=approver)
    assert asked == ["refund"] and refunded == []
    assert run.output == Outcome(order="o-1", refunded=False)


async def test_the_same_agent_end_to_end_with_a_function_model() -> None:
    """The model a test wrote, inside ``AgentTestEnvironment``: a real server and worker.
    The in-process run of the same agent returns the same array as the session's
    ``messages`` query holds; a ``decide`` that answers in the records' words is told
    the right one, and nothing runs."""
    refunded.clear()
    in_process = await run_in_process(support, "Refund o-1", model=script, approver=approve)
    async with AgentTestEnvironment(agents=[support], model=FunctionModel(script)) as env:
        run = await env.run(support, "Refund o-1", decide=lambda pending: "approve")
        queried = await env.messages(run.session_id)
        refunded.clear()
        with pytest.raises(DurableAgentError, match="answer 'approve'"):
            await env.run(support, "Refund o-1", decide=lambda pending: "approved")  # type: ignore[arg-type, return-value]
    assert refunded == [], "the refused answer decided nothing"
    assert run.output == Outcome(order="o-1", refunded=True)
    assert env.model.requests[1].body["messages"][-1]["role"] == "tool"
    assert [_seen(m) for m in in_process.messages] == [_seen(m) for m in queried]


def _seen(message: Any) -> tuple[str, str, tuple[str, ...]]:
    """What a message says, without what differs between two runs (ids, times)."""
    calls = tuple(c.function.name for c in getattr(message, "tool_calls", None) or ())
    return message.role, str(message.content), calls


def approve(pending: PendingApproval) -> Literal["approve"]:
    return "approve"


async def test_an_in_process_run_returns_its_whole_transcript() -> None:
    """``run.messages`` is the session's array: the instructions, the user's message,
    the call, its approved result and the answer, with the ids a session gives."""
    refunded.clear()
    run = await run_in_process(support, "Refund o-1", model=script, approver=approve)
    assert [m.role for m in run.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert run.messages[1].content == "Refund o-1"
    tool_result = run.messages[3]
    assert isinstance(tool_result, ToolMessage) and tool_result.content == "refunded o-1"
    assert tool_result.approval is not None and tool_result.approval.decision == "approved"
    assert run.result.final is not None
    assert run.messages[-1].content == run.result.final.content
    assert all(m.id for m in run.messages)


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ("approved", "answered 'approved' for refund (turn1-call0): answer 'approve'"),
        ("denied", "answer 'deny'"),
        ("respond", "without the call's result: return DecisionRequest("),
        ("yes", "answer 'approve', 'deny', a DecisionRequest, or None"),
    ],
)
async def test_an_approver_answering_other_words_is_told_the_right_one(
    answer: str, says: str
) -> None:
    """The words a caller gives everywhere are ``approve`` and ``deny`` (and a whole
    ``DecisionRequest``); the records' past tense, or anything else, is refused with a
    sentence naming the word to give, not a bare error from inside, and nothing runs."""
    refunded.clear()
    with pytest.raises(DurableAgentError) as raised:
        await run_in_process(support, "Refund o-1", model=script, approver=lambda p: answer)  # type: ignore[arg-type, return-value]
    assert isinstance(raised.value, ValueError)
    assert says in str(raised.value), str(raised.value)
    assert refunded == []


async def test_an_approver_gives_a_whole_decision_as_any_client_does() -> None:
    """A ``DecisionRequest`` edits the call's arguments, or answers in the tool's
    place (the tool does not run), as ``SessionHandle.approve``/``respond`` would."""
    refunded.clear()

    def edit(pending: PendingApproval) -> DecisionRequest:
        edited = {"order": "o-2"}
        return DecisionRequest(
            approval_id=pending.approval_id, decision="approve", arguments=edited
        )

    edited = await run_in_process(support, "Refund o-1", model=script, approver=edit)
    assert refunded == ["o-2"]
    assert edited.messages[3].content == "refunded o-2"

    refunded.clear()

    def respond(pending: PendingApproval) -> DecisionRequest:
        return DecisionRequest(
            approval_id=pending.approval_id, decision="respond", content="refunded by hand"
        )

    answered = await run_in_process(support, "Refund o-1", model=script, approver=respond)
    assert refunded == [], "a response in the tool's place runs nothing"
    assert answered.messages[3].content == "refunded by hand"
    assert answered.output == Outcome(order="o-1", refunded=True)


async def test_a_decision_the_session_refuses_fails_the_run_saying_why() -> None:
    """An edit the tool's schema refuses is not silently dropped."""
    refunded.clear()

    def bad_edit(pending: PendingApproval) -> DecisionRequest:
        wrong = {"order": 12}
        return DecisionRequest(approval_id=pending.approval_id, decision="approve", arguments=wrong)

    with pytest.raises(DurableAgentError, match="refused the approver's decision on refund"):
        await run_in_process(support, "Refund o-1", model=script, approver=bad_edit)
    assert refunded == []
