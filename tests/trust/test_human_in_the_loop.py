"""People deciding tool calls, on the real server through every entry point: updates (the
client), the `durable-agent` CLI and the `temporal` CLI (signals and updates). Each
decision kind, a refused edit, two clients racing for one call, "always" grants across
continue-as-new and their revocation, signed decisions and approvers, escalation at a
deadline, and the rules listing."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client.results import DecisionRefusedError
from durable_agent._contracts.approvals import (
    ApprovalSignal,
    ApproverKey,
    ApproverKeys,
    PendingApproval,
    decision_digest,
)
from durable_agent._wire.messages import AssistantMessage, ToolMessage
from durable_agent.testing import ScriptedProvider
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import (
    record_history,
    running_worker,
    spec_for,
    temporal_cli,
    wait_for,
)
from tests.support.approval_fixtures import Call, batch_then_text, payments_registry

TOOLS = ["transfer", "refund", "lookup"]


def scripted(*batches: list[Call]) -> ScriptedProvider:
    answer = batch_then_text(*batches)

    def respond(request: RecordedRequest) -> AssistantMessage:
        return answer(request.body["messages"])

    return ScriptedProvider(responder=respond)


async def pending_count(agents: AgentClient, session: str, count: int) -> Any:
    async def enough() -> Any:
        pending = await agents.session(session).pending_approvals()
        return pending if len(pending) >= count else None

    return await wait_for(enough, timeout=60)


def results(messages: list[Any]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


async def test_each_decision_kind_a_refused_edit_and_two_clients_racing(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    batch: list[Call] = [
        ("transfer", {"to": "ann", "amount": 1}),
        ("transfer", {"to": "bob", "amount": 2}),
        ("transfer", {"to": "cy", "amount": 900}),
        ("refund", {"invoice": 7}),
        ("transfer", {"to": "dan", "amount": 3}),
    ]
    ran: list[Any] = []
    with scripted(batch) as provider:
        async with running_worker(temporal_env, task_queue, payments_registry(ran, [])) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec_for(provider, TOOLS), "pay them")
            pending = await pending_count(agents, session, 5)
            ids = [p.approval_id for p in pending]
            with pytest.raises(DecisionRefusedError) as refused_edit:
                await agents.session(session).approve(
                    ids[2], arguments={"to": "cy", "amount": "lots"}
                )
            other = AgentClient(
                await Client.connect(
                    address_of(temporal_env), data_converter=pydantic_data_converter
                ),
                task_queue=task_queue,
            )
            await other.session(session).pending_approvals()  # connected: both checks go at once
            race = await asyncio.gather(  # both may pass the check; one decision counts
                agents.session(session).approve(ids[4], by="ann"),
                other.session(session).deny(ids[4], by="bob", reason="no"),
                return_exceptions=True,
            )

            async def decided() -> bool:
                pending = await agents.session(session).pending_approvals()
                return ids[4] not in [p.approval_id for p in pending]

            await wait_for(decided)
            with pytest.raises(DecisionRefusedError) as again:  # decided: refused at once
                await agents.session(session).approve(ids[4], by="cy")
            raced = (await agents.session(session).status()).rejected_signals
            first = await agents.session(session).approve(ids[0], by="ops")
            await agents.session(session).deny(ids[1], by="ops", reason="bob is not a customer")
            edited = await agents.session(session).approve(
                ids[2], by="ops", arguments={"to": "cy", "amount": 90}
            )
            await agents.session(session).respond(ids[3], "refund done by hand", by="ops")
            result = await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
            await record_history(client.get_workflow_handle(session), "approval_decisions")
    assert [p.described_arguments for p in pending][:2] == [
        'transfer(to="ann", amount=1)',
        'transfer(to="bob", amount=2)',
    ]
    assert pending[3].described_arguments == "Refund invoice 7 to the customer's card"
    assert "the edited arguments do not fit transfer: amount: 'lots'" in str(refused_edit.value)
    # one of the two counted; the other changed nothing, and said so: the session refused
    # it at its check (the first was in by then) or, both past the check, rejected it
    refused = [r for r in race if isinstance(r, BaseException)]
    assert all(isinstance(r, DecisionRefusedError) for r in refused), race
    assert all("already" in r.reason for r in refused if isinstance(r, DecisionRefusedError))
    assert len(refused) + len(raced) == 1, (race, raced)
    assert all(f"{ids[4]!r}: already" in text for text in raced), raced
    assert "already" in again.value.reason
    assert first.by == "ops" and not first.verified and edited.decision == "approve"
    ann, bob, cy, refund, dan = results(messages)
    assert ann.content == "sent 1 to ann"
    assert bob.is_error and bob.content == "Tool call denied by ops: bob is not a customer"
    assert cy.content == "sent 90 to cy" and cy.approval is not None
    assert cy.approval.original_arguments == '{"to": "cy", "amount": 900}'
    assert refund.content == "refund done by hand" and refund.approval is not None
    assert refund.approval.decision == "responded" and refund.mode == "tool"
    assert dan.approval is not None and dan.approval.by in ("ann", "bob")
    lost = raced[0] if raced else str(refused[0])  # the later one lost
    assert ("denied" in lost.split("already")[0]) == (dan.approval.by == "ann"), lost
    assert [name for name, _ in ran].count("refund") == 0  # a person answered instead
    assert ("transfer", {"to": "cy", "amount": 90}) in ran
    # the model read the denial's reason and the person's answer
    last = provider.bodies()[-1]["messages"]
    assert "bob is not a customer" in json.dumps(last) and "refund done by hand" in json.dumps(last)
    assert result.final is not None


async def test_always_grants_cross_continue_as_new_and_revoke_by_the_cli(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    batches: list[list[Call]] = [
        [("transfer", {"to": "ann", "amount": 50})],
        [("transfer", {"to": "ann", "amount": 60})],  # the grant covers it
        [("transfer", {"to": "ann", "amount": 700})],  # outside the grant: asked, edited
        [("transfer", {"to": "ann", "amount": 80})],  # revoked: asked again
    ]
    ran: list[Any] = []
    with scripted(*batches) as provider:
        rules = {"continue_as_new_after_events": 20}
        spec = spec_for(provider, TOOLS, session=rules)
        env = {"address": address_of(temporal_env)}
        async with running_worker(temporal_env, task_queue, payments_registry(ran, [])) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "pay ann 50")
            [first] = await pending_count(agents, session, 1)
            granted = await acli(
                "approve",
                session,
                first.approval_id,
                "--always",
                "--matching",
                "$.amount <= 100",
                "--by",
                "ops",
                **env,
            )
            await agents.session(session).wait(answered=[first.approval_id], timeout=60)
            after = await agents.session(session).send("and 60")
            await agents.session(session).wait(after=after, timeout=60)
            listed = await acli("rules", session, **env)
            after = await agents.session(session).send("and 700")
            [big] = await pending_count(agents, session, 1)
            edit = await acli(
                "approve", session, big.approval_id, "--edit", '{"to": "ann", "amount": 70}', **env
            )
            await agents.session(session).wait(after=after, answered=[big.approval_id], timeout=60)
            bad_test = await acli("approve", session, "x", "--always", "--matching", "oops", **env)
            revoked = await acli("revoke", session, "grant-1", **env)

            async def revoked_now() -> bool:
                return not (await agents.session(session).status()).grants

            await wait_for(revoked_now)
            again = await acli("revoke", session, "grant-1", **env)
            after = await agents.session(session).send("and 80")
            [asked] = await pending_count(agents, session, 1)
            status = await agents.session(session).status()
            await agents.session(session).deny(
                asked.approval_id, by="ops", reason="enough for today"
            )
            await agents.session(session).wait(
                after=after, answered=[asked.approval_id], timeout=60
            )
            messages = await agents.session(session).messages()
            await agents.session(session).end()
            await record_history(client.get_workflow_handle(session), "approval_grants")
    assert granted.returncode == 0, granted.stderr
    assert (
        f"approved {first.approval_id}" in granted.stdout
        and "always: calls passing $.amount <= 100" in granted.stdout
    )
    assert "grant-1: transfer ($.amount <= 100) by ops" in listed.stdout, listed.stdout
    assert edit.returncode == 0, edit.stderr
    assert bad_test.returncode == 2 and "--matching: cannot read the test 'oops'" in bad_test.stderr
    assert revoked.returncode == 0 and "revoked grant-1" in revoked.stdout
    assert again.returncode == 2 and "no such grant" in again.stderr
    assert status.runs > 1 and status.grants == []
    paid = results(messages)
    assert [(r.content, r.approval.grant if r.approval else None) for r in paid] == [
        ("sent 50 to ann", "grant-1"),
        ("sent 60 to ann", "grant-1"),
        ("sent 70 to ann", None),
        ("Tool call denied by ops: enough for today", None),
    ]
    assert ran == [("transfer", {"to": "ann", "amount": a}) for a in (50, 60, 70)]


async def test_signed_decisions_approvers_and_the_temporal_cli_door(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    alice, mallory = ApproverKey.generate("alice"), ApproverKey.generate("mallory")
    keys = ApproverKeys.from_json(json.dumps({k.name: k.public_pem() for k in (alice, mallory)}))
    ran: list[Any] = []
    batch: list[Call] = [("transfer", {"to": "ann", "amount": 1}), ("refund", {"invoice": 7})]
    with scripted(batch) as provider:
        spec = spec_for(provider, TOOLS, approvals={"approvers": ["alice"]})
        registry = payments_registry(ran, [])
        async with running_worker(temporal_env, task_queue, registry, approver_keys=keys) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "pay")
            transfer, refund = await pending_count(agents, session, 2)
            with pytest.raises(DecisionRefusedError) as typed:  # a typed name: refused at once
                await agents.session(session).approve(transfer.approval_id, by="alice")
            # signed ones are sent, and the workers refuse them when they check the tokens
            await agents.session(session).approve(transfer.approval_id, key=mallory)
            await agents.session(session).deny(
                transfer.approval_id, key=ApproverKey.generate("alice")
            )

            async def checked() -> Any:
                status = await agents.session(session).status()
                return status.rejected_signals if len(status.rejected_signals) >= 2 else None

            refusals = [typed.value.reason, *await wait_for(checked, timeout=30)]
            still = await agents.session(session).pending_approvals()
            # a token signs the whole decision, the call and the session's run chain
            run = await agents.session(session).run_chain()

            def signed(action: str, call: PendingApproval, **fields: Any) -> str:
                signal = ApprovalSignal(approval_id=call.approval_id, **fields)
                digest = decision_digest(action, call.approval_id, run, call, signal)
                return alice.sign(session, call.approval_id, action, digest=digest)

            decide = {
                "decision": "approve",
                "approval_id": transfer.approval_id,
                "token": signed("approve", transfer),
            }
            updated = await asyncio.to_thread(
                temporal_cli,
                temporal_env,
                "workflow",
                "update",
                "execute",
                "--workflow-id",
                session,
                "--name",
                "decide",
                "--input",
                json.dumps(decide),
                "--output",
                "json",
            )
            respond = {
                "approval_id": refund.approval_id,
                "content": "done by hand",
                "token": signed("respond", refund, content="done by hand"),
            }
            await asyncio.to_thread(
                temporal_cli,
                temporal_env,
                "workflow",
                "signal",
                "--workflow-id",
                session,
                "--name",
                "respond",
                "--input",
                json.dumps(respond),
            )
            await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
            shown = await asyncio.to_thread(
                temporal_cli,
                temporal_env,
                "workflow",
                "show",
                "--workflow-id",
                session,
                "--output",
                "json",
            )
            await record_history(client.get_workflow_handle(session), "approval_signed")
    assert [p.approval_id for p in still] == [transfer.approval_id, refund.approval_id]
    assert "a signed token is required" in refusals[0]
    assert "mallory may not decide (approvers: alice)" in refusals[1]
    assert "the token was refused (Signature verification failed)" in refusals[2]
    assert '"verified": true' in updated and '"by": "alice"' in updated, updated
    paid, answered = results(messages)
    assert paid.approval is not None and (paid.approval.by, paid.approval.verified) == (
        "alice",
        True,
    )
    assert answered.content == "done by hand" and answered.approval is not None
    assert answered.approval.verified and answered.approval.by == "alice"
    assert ran == [("transfer", {"to": "ann", "amount": 1})]
    assert "PRIVATE KEY" not in shown and alice.public_pem().splitlines()[1] not in shown


async def test_a_deadline_escalates_to_a_second_group_who_decide(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    ran: list[Any] = []
    notices: list[Any] = []
    batch: list[Call] = [("transfer", {"to": "ann", "amount": 1}), ("refund", {"invoice": 7})]
    with scripted(batch) as provider:
        approvals = {
            "approvers": ["alice"],
            "accept_unsigned": True,
            "escalation": {"extend_seconds": 60, "notify": ["oncall"], "notifier": "page_oncall"},
        }
        tools = [
            {"name": "transfer", "approval_timeout_seconds": 8},
            {"name": "refund", "approval_timeout_seconds": 8},
        ]
        spec = spec_for(provider, tools, approvals=approvals)
        env = {"address": address_of(temporal_env)}
        registry = payments_registry(ran, notices)
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "pay")
            transfer, refund = await pending_count(agents, session, 2)
            with pytest.raises(DecisionRefusedError) as early:  # before the deadline
                await agents.session(session).approve(transfer.approval_id, by="oncall")

            async def escalated() -> Any:
                pending = await agents.session(session).pending_approvals()
                return pending if all(p.escalated_to for p in pending) else None

            later = await wait_for(escalated, timeout=30)
            shown = await acli("status", session, **env)
            approved = await acli("approve", session, transfer.approval_id, "--by", "oncall", **env)
            answered = await acli(
                "respond", session, refund.approval_id, "done by hand", "--by", "oncall", **env
            )
            await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
    assert "oncall may not decide (approvers: alice)" in early.value.reason
    assert [p.approvers for p in later] == [["alice", "oncall"]] * 2
    assert "escalated to oncall" in shown.stdout, shown.stdout
    assert approved.returncode == 0 and answered.returncode == 0, answered.stderr
    [notice] = notices
    assert notice.session_id == session and notice.notify == ["oncall"]
    assert sorted(p.approval_id for p in notice.approvals) == sorted(
        [transfer.approval_id, refund.approval_id]
    )
    paid, refunded = results(messages)
    assert paid.approval is not None and paid.approval.escalated and paid.approval.by == "oncall"
    assert refunded.content == "done by hand"
    assert ran == [("transfer", {"to": "ann", "amount": 1})]


async def test_rules_decide_on_the_real_server_and_a_tools_own_approvers(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Rules ask a named predicate through the workers once per batch; the first match
    decides and is recorded; a tool's own approvers replace the session's. (The spec
    gates ``transfer`` itself here: over a tool its owner gates, a rule may not allow.)"""
    batch: list[Call] = [
        ("transfer", {"to": "XX-1", "amount": 500}),  # sanctioned: denied by rule
        ("transfer", {"to": "bob", "amount": 5}),  # small: allowed by rule
        ("transfer", {"to": "acct-9", "amount": 500}),  # known payee (named predicate)
        ("lookup", {"customer": "ada"}),  # asked by a rule; only ops may decide it
    ]
    rules = [
        {
            "name": "sanctioned",
            "tools": "transfer",
            "action": "deny",
            "reason": "sanctioned",
            "when": [{"path": "$.to", "op": "matches", "value": "^XX"}],
        },
        {
            "name": "small",
            "tools": "transfer",
            "action": "allow",
            "when": [{"path": "$.amount", "op": "<=", "value": 10}],
        },
        {"name": "known", "tools": "transfer", "predicate": "known_payee", "action": "allow"},
        {"name": "lookups", "tools": "lookup", "action": "ask"},
    ]
    ran: list[Any] = []
    with scripted(batch) as provider:
        tools = [
            {"name": "transfer", "approval": "always"},
            "refund",
            {"name": "lookup", "approvers": ["ops"]},
        ]
        approvals = {"rules": rules, "approvers": ["alice"], "accept_unsigned": True}
        spec = spec_for(provider, tools, approvals=approvals)
        registry = payments_registry(ran, [], transfer_approval="never")
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "pay")
            [lookup] = await pending_count(agents, session, 1)
            with pytest.raises(DecisionRefusedError) as alice:
                await agents.session(session).approve(lookup.approval_id, by="alice")
            await agents.session(session).approve(lookup.approval_id, by="ops")
            await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
            shown = await acli("history", session, address=address_of(temporal_env))
    assert (lookup.rule, lookup.approvers) == ("lookups", ["ops"])
    assert "alice may not decide (approvers: ops)" in alice.value.reason
    records = [r.approval for r in results(messages)]
    assert [(r.decision, r.rule) for r in records if r] == [
        ("denied", "sanctioned"),
        ("approved", "small"),
        ("approved", "known"),
        ("approved", "lookups"),
    ]
    assert [name for name, _ in ran] == ["transfer", "transfer", "lookup"]
    assert "(allowed by rule known)" in shown.stdout, shown.stdout
