"""The gate and people's decisions in the pure Session (milliseconds): argument tests,
rules as data (first match wins, the rule recorded), every decision kind, standing
grants, who may decide (signed tokens), escalation at a deadline, readable requests."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from durable_agent._contracts.approvals import (
    ApprovalSignal,
    ApproverKey,
    ApproverKeys,
    PendingApproval,
    RevokeGrantSignal,
    decision_digest,
)
from durable_agent._session import (
    AwaitApprovals,
    ContinueAsNew,
    RunTools,
    Session,
    SessionState,
    ToolRun,
)
from durable_agent._session.protocol import DecisionArrived, RevokeRequested
from durable_agent._spec.approval_policy import ArgumentTest, describe_arguments, parse_test
from durable_agent._spec.document import AgentInput, AgentSpec
from durable_agent._wire.messages import AssistantMessage, RecordedDecision, ToolMessage
from durable_agent.testing import assistant_calls, assistant_text
from durable_agent.testing._in_process import Approver, InProcessRun
from tests.support.approval_fixtures import Call, batch_then_text, payments_registry
from tests.support.session_steps import Stepper

NEW_YEAR = datetime(2026, 1, 1, tzinfo=UTC)


def payments_spec(tools: list[Any] | None = None, **extra: Any) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "model": {"name": "m"},
            "tools": tools or ["transfer", "refund", "lookup"],
            "session": {"end_after_reply": True},
            **extra,
        }
    )


def drive(
    spec: AgentSpec, batch: list[Call], approver: Approver, **kw: Any
) -> tuple[InProcessRun, list[tuple[str, dict[str, Any]]]]:
    ran: list[tuple[str, dict[str, Any]]] = []
    notices: list[Any] = []
    answer = batch_then_text(batch)
    driver = InProcessRun(
        spec, payments_registry(ran, notices), lambda body: answer(body["messages"]), approver, **kw
    )
    return driver, ran


def results(driver: InProcessRun) -> list[ToolMessage]:
    return [m for m in driver.session.messages if isinstance(m, ToolMessage)]


@pytest.mark.parametrize(
    ("test", "arguments", "holds"),
    [
        ({"path": "$.amount", "op": "<=", "value": 100}, {"amount": 100}, True),
        ({"path": "$.amount", "op": ">", "value": 100}, {"amount": 100}, False),
        ({"path": "amount", "op": "<", "value": 5}, {"amount": "3"}, False),  # no mixing
        ({"path": "$.to.iban", "op": "matches", "value": "^DE"}, {"to": {"iban": "DE12"}}, True),
        ({"path": "$.items[1]", "op": "==", "value": "b"}, {"items": ["a", "b"]}, True),
        ({"path": "$.items[5]", "op": "==", "value": None}, {"items": ["a"]}, False),
        ({"path": "$.cc", "op": "exists"}, {"to": "x"}, False),
        ({"path": "$.tag", "op": "in", "value": ["a", "b"]}, {"tag": "b"}, True),
        ({"path": "$.tag", "op": "not in", "value": ["a", "b"]}, {"tag": "c"}, True),
        ({"path": "$.note", "op": "contains", "value": "urgent"}, {"note": "not urgent"}, True),
        ({"path": "$.flag", "op": ">", "value": 0}, {"flag": True}, False),  # bools are no numbers
    ],
)
def test_argument_tests(test: dict[str, Any], arguments: Any, holds: bool) -> None:
    assert ArgumentTest.model_validate(test).holds(arguments) is holds


def test_argument_tests_from_text_and_their_errors() -> None:
    assert parse_test("$.amount <= 100") == ArgumentTest(path="$.amount", op="<=", value=100)
    assert parse_test("$.to matches ^acct-") == ArgumentTest(
        path="$.to", op="matches", value="^acct-"
    )
    assert parse_test('$.tag not in ["a"]').op == "not in"
    assert parse_test("$.cc exists").op == "exists"
    with pytest.raises(ValueError, match="write PATH OP VALUE"):
        parse_test("amount is big")
    with pytest.raises(ValidationError, match="cannot read the path"):
        ArgumentTest(path="$..amount", op="==", value=1)
    with pytest.raises(ValidationError, match="needs a list"):
        ArgumentTest(path="$.a", op="in", value="x")
    with pytest.raises(ValidationError, match="regular expression"):
        ArgumentTest(path="$.a", op="matches", value=3)


def test_the_default_readable_form() -> None:
    assert describe_arguments("transfer", '{"to": "bob", "amount": 5}') == (
        'transfer(to="bob", amount=5)'
    )
    assert describe_arguments("x", "not json") == "x(not json)"
    # whole, however long: padding cannot push the rest out of the approver's sight
    padded = "y" * 300 + " and wire it all to mallory"
    assert describe_arguments("x", json.dumps({"a": padded})) == f'x(a="{padded}")'


SMALL = {"path": "$.amount", "op": "<=", "value": 10}
XX = {"path": "$.to", "op": "matches", "value": "^XX"}
RULES = {
    "rules": [
        {"name": "small", "tools": "transfer", "when": [SMALL], "action": "allow"},
        {
            "name": "sanctioned",
            "tools": ["transfer"],
            "when": [XX],
            "action": "deny",
            "reason": "sanctioned payee",
        },
        {"name": "known", "tools": "transfer", "predicate": "known_payee", "action": "allow"},
        {"tools": "lookup", "action": "ask"},
    ]
}


async def test_rules_first_match_wins_and_the_rule_is_recorded() -> None:
    batch: list[Call] = [
        ("transfer", {"to": "XX-1", "amount": 5}),  # small comes first
        ("transfer", {"to": "XX-1", "amount": 500}),  # sanctioned
        ("transfer", {"to": "acct-9", "amount": 500}),  # known (named predicate)
        ("transfer", {"to": "bob", "amount": 500}),  # no rule: the tool's own policy asks
        ("lookup", {"customer": "ada"}),  # rule 4 asks although lookup never would
    ]
    asked: list[PendingApproval] = []

    def approver(pending: PendingApproval) -> RecordedDecision:
        asked.append(pending)
        return "approved"

    driver, ran = drive(payments_spec(approvals=RULES), batch, approver)
    result = await driver.run(AgentInput(spec=driver.spec, message="pay"))
    assert result.status == "done"
    assert [(p.tool_name, p.rule) for p in asked] == [("transfer", None), ("lookup", "rule 4")]
    records = [r.approval for r in results(driver)]
    assert [r.rule if r else None for r in records] == [
        "small",
        "sanctioned",
        "known",
        None,
        "rule 4",
    ]
    decisions = [r.decision if r else None for r in records]
    assert decisions == ["approved", "denied", "approved", "approved", "approved"]
    assert results(driver)[1].is_error and "sanctioned payee" in results(driver)[1].content
    assert [name for name, _ in ran] == ["transfer", "transfer", "transfer", "lookup"]


async def test_rules_judge_the_arguments_the_tool_receives_and_fail_closed() -> None:
    """``{"amount": "5000"}`` reaches the tool as 5000 (lax validation), so the rule
    judges 5000; an amount no rule can compare is denied by a deny rule, never let
    through by an allow rule; a grant for small amounts does not cover a coerced
    large one."""
    below = {"path": "$.amount", "op": "<", "value": 10}
    above = {"path": "$.amount", "op": ">", "value": 1000}
    rules = {
        "rules": [
            {"name": "small", "tools": "transfer", "when": [below], "action": "allow"},
            {"name": "big", "tools": "transfer", "when": [above], "action": "deny", "reason": "no"},
        ]
    }
    batch: list[Call] = [
        ("transfer", {"to": "ann", "amount": "5000"}),  # a string the tool gets as 5000
        ("transfer", {"to": "ann", "amount": "lots"}),  # no comparison: fails closed
        ("transfer", {"to": "ann", "amount": "5"}),  # 5: the allow rule
    ]
    asked: list[PendingApproval] = []

    def approver(pending: PendingApproval) -> RecordedDecision:
        asked.append(pending)
        return "approved"

    driver, ran = drive(payments_spec(approvals=rules), batch, approver)
    await driver.run(AgentInput(spec=driver.spec, message="pay"))
    big, unknown, small = [r.approval for r in results(driver)]
    assert big is not None and (big.decision, big.rule) == ("denied", "big")
    assert unknown is not None and (unknown.decision, unknown.rule) == ("denied", "big")
    assert small is not None and (small.decision, small.rule) == ("approved", "small")
    assert asked == [] and ran == [("transfer", {"to": "ann", "amount": 5})]


async def test_every_decision_kind() -> None:
    batch: list[Call] = [
        ("transfer", {"to": "ann", "amount": 1}),
        ("transfer", {"to": "bob", "amount": 2}),
        ("transfer", {"to": "cy", "amount": 900}),
        ("refund", {"invoice": 7}),
    ]

    def approver(pending: PendingApproval) -> Any:
        signal = {"approval_id": pending.approval_id, "by": "ops"}
        return {
            0: "approved",
            1: ("denied", ApprovalSignal(**signal, reason="bob is not a customer")),
            2: ("approved", ApprovalSignal(**signal, arguments={"to": "cy", "amount": 90})),
            3: ("responded", ApprovalSignal(**signal, content="refund done by hand")),
        }[pending.slot]

    driver, ran = drive(payments_spec(), batch, approver)
    result = await driver.run(AgentInput(spec=driver.spec, message="pay"))
    assert ran == [
        ("transfer", {"to": "ann", "amount": 1}),
        ("transfer", {"to": "cy", "amount": 90}),
    ]
    approved, denied, edited, responded = results(driver)
    assert approved.content == "sent 1 to ann"
    assert denied.is_error and denied.content == "Tool call denied by ops: bob is not a customer"
    assert edited.content == "sent 90 to cy"
    assert (
        edited.approval is not None
        and edited.approval.original_arguments == '{"to": "cy", "amount": 900}'
    )
    assert edited.approval.arguments == '{"to": "cy", "amount": 90}'
    assert responded.content == "refund done by hand" and not responded.is_error
    assert responded.approval is not None and responded.approval.decision == "responded"
    # the model read each outcome, the denial's reason among them
    assert result.final is not None and "bob is not a customer" in result.final.content
    # the call in the array keeps the model's own arguments
    call = driver.session.messages[1]
    assert isinstance(call, AssistantMessage) and call.tool_calls is not None
    assert call.tool_calls[2].function.arguments == '{"to": "cy", "amount": 900}'


async def test_edits_and_requests_that_cannot_apply_are_refused_and_change_nothing() -> None:
    seen: list[str | None] = []

    def approver(pending: PendingApproval) -> Any:
        session = driver.session
        bad = [
            ApprovalSignal(
                approval_id=pending.approval_id, arguments={"to": "x", "amount": "lots"}
            ),
            ApprovalSignal(approval_id=pending.approval_id, arguments={"to": "x"}),
            ApprovalSignal(approval_id="turn9-call9"),
            ApprovalSignal(approval_id=pending.approval_id, always="matching"),
        ]
        seen.extend(session.view.refusal(DecisionArrived(s, "approved")) for s in bad)
        seen.append(
            session.view.refusal(
                DecisionArrived(ApprovalSignal(approval_id=pending.approval_id), "responded")
            )
        )
        assert session.handle(DecisionArrived(bad[0], "approved"), driver.clock) is not None
        return "approved"

    driver, ran = drive(payments_spec(), [("transfer", {"to": "ann", "amount": 1})], approver)
    await driver.run(AgentInput(spec=driver.spec, message="pay"))
    assert seen[0] is not None and "amount: 'lots' is not of type 'integer'" in seen[0]
    assert seen[1] is not None and "'amount' is a required property" in seen[1]
    assert seen[2].startswith("approved 'turn9-call9': no call waits for a decision or its")
    assert seen[3] is not None and "needs at least one test" in seen[3]
    assert seen[4] is not None and "give the tool's result as content" in seen[4]
    assert ran == [("transfer", {"to": "ann", "amount": 1})]  # as the model asked
    assert "amount: 'lots'" in driver.session.view.status().rejected_signals[0]


async def test_always_grants_cover_later_calls_and_can_be_revoked() -> None:
    batch: list[Call] = [
        ("transfer", {"to": "ann", "amount": 50}),
        ("transfer", {"to": "ann", "amount": 60}),  # covered at once by the grant
        ("transfer", {"to": "ann", "amount": 500}),  # outside it: still asked
    ]
    asked: list[int] = []

    def approver(pending: PendingApproval) -> Any:
        asked.append(pending.slot)
        if pending.slot == 0:
            tests = [parse_test("$.amount <= 100")]
            signal = ApprovalSignal(
                approval_id=pending.approval_id, by="ops", always="matching", matching=tests
            )
            return "approved", signal
        return "denied"

    driver, ran = drive(payments_spec(), batch, approver)
    await driver.run(AgentInput(spec=driver.spec, message="pay"))
    assert asked == [0, 2]
    assert ran == [
        ("transfer", {"to": "ann", "amount": 50}),
        ("transfer", {"to": "ann", "amount": 60}),
    ]
    first, second, third = (r.approval for r in results(driver))
    assert first is not None and first.scope == "matching" and first.grant == "grant-1"
    assert second is not None and second.grant == "grant-1" and second.by == "ops"
    assert third is not None and third.decision == "denied"
    [grant] = driver.session.view.status().grants
    assert (grant.tool, str(grant.matching[0])) == ("transfer", "$.amount <= 100")
    unknown = driver.session.view.refusal(RevokeRequested(RevokeGrantSignal(grant_id="grant-7")))
    assert unknown == "revoke 'grant-7': no such grant (grants: grant-1)"
    assert (
        driver.session.handle(
            RevokeRequested(RevokeGrantSignal(grant_id="grant-1", by="ops")), driver.clock
        )
        is None
    )
    assert driver.session.view.status().grants == []


async def test_one_always_decision_approves_a_whole_waiting_batch_in_request_order() -> None:
    """Sixty calls that all wait: the first one's approval, "always" for the tool, approves
    the other 59 at once (nobody is asked again), every call runs, and the results come
    back in request order, each with the grant that approved it."""
    batch: list[Call] = [("transfer", {"to": f"acct{k}", "amount": k}) for k in range(60)]
    asked: list[int] = []

    def approver(pending: PendingApproval) -> Any:
        asked.append(pending.slot)
        aid = pending.approval_id
        return "approved", ApprovalSignal(approval_id=aid, by="ops", always="tool", reason="ok")

    driver, ran = drive(payments_spec(), batch, approver)
    await driver.run(AgentInput(spec=driver.spec, message="pay them all"))
    assert asked == [0]
    assert sorted(ran, key=lambda c: c[1]["amount"]) == batch
    [reply] = [m for m in driver.session.messages if m.role == "assistant" and m.tool_calls]
    assert reply.tool_calls is not None
    done = results(driver)
    assert [r.tool_call_id for r in done] == [c.id for c in reply.tool_calls]
    records = [r.approval for r in done]
    assert all(r is not None and r.grant == "grant-1" and r.by == "ops" for r in records)
    # the person's own decision on the first call, the grant's on the others
    assert [r.reason for r in records if r is not None] == ["ok"] + [None] * 59
    assert (
        driver.session.view.approvals.asked() == []
        and driver.session.view.approvals.decided() == {}
    )


async def test_only_approvers_decide_and_a_name_proves_nothing_without_a_signature() -> None:
    alice, mallory = ApproverKey.generate("alice"), ApproverKey.generate("mallory")
    keys = ApproverKeys.from_json(json.dumps({k.name: k.public_pem() for k in (alice, mallory)}))
    spec = payments_spec(approvals={"approvers": ["alice"]})
    refused: list[str | None] = []

    def approver(pending: PendingApproval) -> Any:
        session, aid = driver.session, pending.approval_id
        sid = driver.session_id

        def token(
            key: ApproverKey, action: str = "approve", subject: str = aid, **more: Any
        ) -> str:
            """Signed for a plain decision on this call (the driver's run chain is "")."""
            run = more.pop("run", "")
            digest = decision_digest(action, subject, run, pending, ApprovalSignal(approval_id=aid))
            return key.sign(sid, subject, action, digest=digest, **more)

        attempts = [
            ApprovalSignal(approval_id=aid, by="alice"),  # unsigned: proves nothing
            ApprovalSignal(approval_id=aid, token=token(mallory)),
            ApprovalSignal(approval_id=aid, token=token(alice, subject="turn1-call9")),
            ApprovalSignal(approval_id=aid, token=token(alice, "deny")),
            ApprovalSignal(approval_id=aid, token=token(alice, now=0)),
            # a plain approval's token, with an edit and a standing grant added unsigned
            ApprovalSignal(
                approval_id=aid, token=token(alice), arguments={"to": "eve", "amount": 1}
            ),
            ApprovalSignal(approval_id=aid, token=token(alice), always="tool"),
            # signed in another session's run under the same id; signed to live for hours
            ApprovalSignal(approval_id=aid, token=token(alice, run="an-ended-run")),
            ApprovalSignal(approval_id=aid, token=token(alice, ttl_seconds=7200)),
            # a token that signs nothing but the old three claims
            ApprovalSignal(approval_id=aid, token=alice.sign(sid, aid, "approve")),
        ]
        for signal in attempts:
            refused.append(session.handle(DecisionArrived(signal, "approved"), driver.clock))
        return "approved", ApprovalSignal(approval_id=aid, token=token(alice))

    driver, ran = drive(spec, [("transfer", {"to": "ann", "amount": 1})], approver, keys=keys)
    await driver.run(AgentInput(spec=driver.spec, message="pay"))
    rejected = driver.session.view.status().rejected_signals
    assert refused[0] is not None and "a signed token is required" in refused[0]
    assert "mallory may not decide (approvers: alice)" in rejected[1]
    assert "signed for another call" in rejected[2]
    assert "signed for another action" in rejected[3]
    assert "Signature has expired" in rejected[4]
    for refusal in (rejected[5], rejected[6], rejected[7], rejected[9]):
        assert "signed for another decision (its content, its call or the session's run)" in (
            refusal
        ), refusal
    assert "the token would live over 3600 s" in rejected[8]
    assert len(rejected) == 10, rejected
    [paid] = results(driver)
    assert paid.approval is not None and paid.approval.by == "alice" and paid.approval.verified
    assert ran == [("transfer", {"to": "ann", "amount": 1})]


async def test_a_deadline_escalates_once_then_the_default_applies() -> None:
    spec = payments_spec(
        tools=[{"name": "transfer", "approval_timeout_seconds": 60}],
        approvals={
            "approvers": ["alice"],
            "accept_unsigned": True,
            "escalation": {"extend_seconds": 120, "notify": ["oncall"], "notifier": "page_oncall"},
        },
    )
    seen: list[PendingApproval] = []

    def approver(pending: PendingApproval) -> Any:
        seen.append(pending)
        return None  # nobody answers

    driver, ran = drive(spec, [("transfer", {"to": "ann", "amount": 1})], approver)
    await driver.run(AgentInput(spec=driver.spec, message="pay"))
    first, after = seen[0], seen[-1]
    assert first.escalated_to is None and first.approvers == ["alice"]
    assert after.escalated_to == ["oncall"] and after.approvers == ["alice", "oncall"]
    assert after.deadline is not None and first.deadline is not None
    assert (after.deadline - first.deadline).total_seconds() == 120
    [notice] = driver.notices
    assert [p.approval_id for p in notice.approvals] == ["turn1-call0"] and notice.notify == [
        "oncall"
    ]
    [denied] = results(driver)
    assert denied.approval is not None and denied.approval.timed_out and denied.approval.escalated
    assert ran == []


async def test_waiting_calls_are_described() -> None:
    seen: list[str | None] = []

    def approver(pending: PendingApproval) -> RecordedDecision:
        seen.append(pending.described_arguments)
        return "approved"

    batch: list[Call] = [("transfer", {"to": "ann", "amount": 1}), ("refund", {"invoice": 7})]
    driver, _ = drive(payments_spec(), batch, approver)
    await driver.run(AgentInput(spec=driver.spec, message="pay"))
    assert seen == ['transfer(to="ann", amount=1)', "Refund invoice 7 to the customer's card"]


async def test_a_spec_naming_a_predicate_no_worker_has_fails_at_start() -> None:
    spec = payments_spec(approvals={"rules": [{"predicate": "nope", "action": "allow"}]})
    driver, _ = drive(spec, [], lambda p: "approved")
    with pytest.raises(ValueError, match="no worker has loaded: nope"):
        await driver.run(AgentInput(spec=spec, message="x"))


def test_a_signed_decision_on_a_sub_agents_call_is_sent_to_the_child() -> None:
    pending = PendingApproval(
        approval_id="turn1-call0",
        turn=1,
        slot=0,
        tool_name="transfer",
        arguments="{}",
        requested_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    state = SessionState.model_validate(
        {"decisions": {"child_pending": {"s-1--researcher-t1c0": [pending]}}}
    )
    session = Session(payments_spec(), state)
    signed = ApprovalSignal(approval_id="researcher-t1c0/turn1-call0", token="x.y.z")
    problem = session.view.refusal(DecisionArrived(signed, "approved"))
    assert problem is not None and "goes to its own session (s-1--researcher-t1c0" in problem
    assert session.handle(DecisionArrived(signed, "approved"), NEW_YEAR) == problem
    assert state.decisions.forwards == []  # nothing passed on
    unsigned = signed.model_copy(update={"token": None})
    assert session.handle(DecisionArrived(unsigned, "approved"), NEW_YEAR) is None
    assert [f[0] for f in state.decisions.forwards] == ["s-1--researcher-t1c0"]


def test_a_decided_batch_runs_before_a_continue_as_new() -> None:
    """A continue-as-new that becomes due while approvals wait (the history grew) must not
    come between the decisions and the calls: the decisions live in the batch then."""
    driver = _transfer_approved_by_ops()
    driver.suggest = True  # the history is long now
    command = driver.step()
    assert isinstance(command, RunTools), command
    assert command.groups[0][0].approval is not None
    assert command.groups[0][0].approval.by == "ops"
    [result] = results(driver)
    assert result.tool_name == "transfer" and result.approval is not None
    assert isinstance(driver.step(), ContinueAsNew)  # once the batch's results joined


def test_a_batchs_runs_are_made_as_runners_take_them_with_what_the_batch_decided() -> None:
    """A batch of 300 calls opens without making 300 runs: each is made when a runner
    takes it (the task that opens a batch of thousands does not pay for all of them),
    with the approval decided for its slot when the batch opened, in request order.
    The batch does not keep them: a run is let go with its call, not with all 300 when
    the batch is over."""
    calls = [("lookup", {"customer": f"c{k}"}) for k in range(299)]
    driver = _transfer_approved_by_ops(*calls)
    session = driver.session
    made: list[int] = []
    maker = session._batch._tool_runs

    def counted(batch: Any) -> Callable[[int], ToolRun]:
        make = maker(batch)
        return lambda slot: (made.append(slot), make(slot))[1]

    session._batch._tool_runs = counted  # type: ignore[method-assign]
    # the command is only read here: carrying it out would make every run
    command = session.next_command(suggested=False, now=driver.clock)
    assert isinstance(command, RunTools), command
    runs = command.groups[0]
    assert len(runs) == 300 and made == []  # nothing made when the batch opens
    taken = [runs[k] for k in range(5)]  # five runners take a call each
    assert made == [0, 1, 2, 3, 4]
    assert taken[0].approval is not None and taken[0].approval.by == "ops"
    assert [r.call.function.arguments for r in taken[1:]] == [
        json.dumps({"customer": f"c{k}"}) for k in range(4)
    ]
    gone = weakref.ref(taken.pop())
    gc.collect()
    assert gone() is None  # not kept by the batch
    assert runs[1] == taken[1] and runs[1] is not taken[1]  # made again, the same
    assert [r.slot for r in runs] == list(range(300))


def _transfer_approved_by_ops(*more: tuple[str, dict[str, Any]]) -> Stepper:
    """A session whose model asked for a transfer (then ``more`` calls) in one batch, the
    transfer approved by ops, driven through the executor: its next command runs the
    batch."""
    replies = iter([assistant_calls(("transfer", {"to": "ann", "amount": 1}), *more)])
    driver = Stepper(
        payments_spec(),
        payments_registry([], []),
        lambda body: next(replies, assistant_text("done")),
    )
    driver.open("pay")
    driver.step_until(AwaitApprovals)  # it holds: nobody has decided
    assert driver.decide("turn1-call0") is None
    driver.step()  # the wait ends: the decision goes into the batch
    return driver
