"""A signed decision belongs to the run that asked: in a user's workflow that runs the
same agent inline twice, alice's signed approval of the first run's transfer, sent
again as the decision of the second run's identical call, is refused, and the transfer
runs once. The digest a token signs names the run, so after a reset (a new run id,
asking the same approval id again) a token from before it decides nothing either."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agent import AgentClient, Registry
from durable_agent._contracts.approvals import (
    ApprovalSignal,
    ApproverKey,
    ApproverKeys,
    DecisionRequest,
    PendingApproval,
    decision_digest,
)
from durable_agent.capabilities import Capabilities, ProviderEndpoint
from durable_agent.temporal import DurableAgentPlugin
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support import inline_workflows as user
from tests.support.agent_harness import (
    record_history,
    reset_to_first_task,
    running_worker,
    spec_for,
    wait_for,
)
from tests.support.approval_fixtures import payments_registry
from tests.trust.test_human_in_the_loop import TOOLS, pending_count, results, scripted


def signed_approval(key: ApproverKey, workflow_id: str, call: PendingApproval) -> DecisionRequest:
    """What alice's own client sends for the call she sees: signed for it alone."""
    plain = ApprovalSignal(approval_id=call.approval_id)
    digest = decision_digest("approve", call.approval_id, "", call, plain)
    token = key.sign(workflow_id, call.approval_id, "approve", digest=digest)
    return DecisionRequest(approval_id=call.approval_id, decision="approve", token=token)


async def test_a_signed_approval_of_one_inline_run_decides_nothing_in_the_next(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    alice = ApproverKey.generate("alice")
    keys = ApproverKeys.from_json(json.dumps({"alice": alice.public_pem()}))
    ledger = tmp_path / "transfers.txt"
    os.environ["INLINE_TRANSFERS"] = str(ledger)
    pay = assistant_calls(("transfer", {"to": "bob", "amount": 100}))
    script = [pay, assistant_text("paid"), pay, assistant_text("paid again")]
    client = temporal_env.client
    try:
        with ScriptedProvider(script) as provider:
            plugin = DurableAgentPlugin(
                registry=Registry([user.transfer]),
                preload_tokenizers=False,
                approver_keys=keys,
                capabilities=Capabilities(
                    models={
                        "scripted": ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
                    }
                ),
            )
            async with Worker(
                client, task_queue=task_queue, workflows=[user.TwoPayments], plugins=[plugin]
            ):
                workflow_id = f"pay-{uuid.uuid4().hex[:8]}"
                handle = await client.start_workflow(
                    user.TwoPayments.run, "bob", id=workflow_id, task_queue=task_queue
                )

                async def waiting(count: int) -> list[PendingApproval] | None:
                    found = await handle.query(user.TwoPayments.pending)
                    return found if len(provider.requests) >= count and found else None

                [first] = await wait_for(lambda: waiting(1), timeout=60)
                kept = signed_approval(alice, workflow_id, first)
                decided = await handle.execute_update(user.TwoPayments.decide, kept)
                [second] = await wait_for(lambda: waiting(3), timeout=60)
                # the same approval id and the same call, asked by the second run
                with pytest.raises(WorkflowUpdateFailedError) as refused:
                    await handle.execute_update(user.TwoPayments.decide, kept)
                still = await handle.query(user.TwoPayments.pending)
                transfers_while_waiting = ledger.read_text()
                # alice signs what the second run shows her: that one counts
                fresh = signed_approval(alice, workflow_id, second)
                await handle.execute_update(user.TwoPayments.decide, fresh)
                answers = await handle.result()
    finally:
        os.environ.pop("INLINE_TRANSFERS", None)
    assert decided.verified and decided.by == "alice"
    assert (first.approval_id, first.arguments) == (second.approval_id, second.arguments)
    assert first.run and second.run and first.run != second.run, "each run names itself"
    cause = str(getattr(refused.value.cause, "message", refused.value.cause))
    assert "signed for another decision" in cause, cause
    assert [p.approval_id for p in still] == [second.approval_id], "still waiting"
    assert transfers_while_waiting == "bob 100\n", "the replayed token ran nothing"
    assert ledger.read_text() == "bob 100\nbob 100\n", "each run's own approval ran its call"
    assert answers == ["paid", "paid again"]


def test_a_digest_names_the_run_that_asked_so_a_reset_asks_anew() -> None:
    """The same approval id, call and decision asked by two runs of one chain (before
    and after a reset, which gives the workflow a new run id) sign different digests;
    a call carried from a run recorded before calls named their run falls back to the
    chain, as it was signed then."""
    call = PendingApproval.model_validate(
        {
            "approval_id": "turn1-call0",
            "turn": 1,
            "slot": 0,
            "tool_name": "transfer",
            "arguments": '{"to": "bob", "amount": 100}',
            "requested_at": "2026-01-01T00:00:00Z",
        }
    )
    plain = ApprovalSignal(approval_id=call.approval_id)
    before = call.model_copy(update={"run": "run-a"})
    after = call.model_copy(update={"run": "run-b"})
    digest = decision_digest("approve", call.approval_id, "chain", before, plain)
    assert digest != decision_digest("approve", call.approval_id, "chain", after, plain)
    assert digest == decision_digest("approve", call.approval_id, "other chain", before, plain)
    old = decision_digest("approve", call.approval_id, "chain", call, plain)
    assert old == decision_digest("approve", call.approval_id, "chain", call, plain)
    assert old != decision_digest("approve", call.approval_id, "other chain", call, plain)


async def test_a_signed_approval_from_before_a_reset_decides_nothing_after_it(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    alice = ApproverKey.generate("alice")
    keys = ApproverKeys.from_json(json.dumps({"alice": alice.public_pem()}))
    ran: list[Any] = []
    with scripted([("transfer", {"to": "ann", "amount": 1})]) as provider:
        spec = spec_for(provider, TOOLS, approvals={"approvers": ["alice"]}, session={})
        registry = payments_registry(ran, [])
        async with running_worker(temporal_env, task_queue, registry, approver_keys=keys) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "pay ann", session_id=f"reset-{task_queue}")
            [before] = await pending_count(agents, session, 1)
            kept = signed_approval(alice, session, before)
            await reset_to_first_task(temporal_env, session)

            async def asked_again() -> Any:
                found = await agents.session(session).pending_approvals()
                return found if found and found[0].run != before.run else None

            [after] = await wait_for(asked_again, timeout=60)
            handle = client.get_workflow_handle(session)
            await handle.signal("approve", kept.as_signal())

            async def refused() -> Any:
                status = await agents.session(session).status()
                return status.rejected_signals or None

            refusals = await wait_for(refused, timeout=30)
            ran_before_fresh = list(ran)
            await agents.session(session).approve(after.approval_id, key=alice)

            async def paid() -> Any:
                return results(await agents.session(session).messages()) or None

            [result] = await wait_for(paid, timeout=30)
            await record_history(handle, "approval_asked_again_after_reset")
    assert after.approval_id == before.approval_id and after.arguments == before.arguments
    assert any("signed for another decision" in r for r in refusals), refusals
    assert ran_before_fresh == [], "the token from before the reset ran nothing"
    assert result.approval is not None and result.approval.verified
    assert ran == [("transfer", {"to": "ann", "amount": 1})], "the fresh approval ran it once"
