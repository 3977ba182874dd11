"""A signed decision is worth exactly what its signer saw, on the real server: a token
from an ended session's run approves nothing in a new session under the same id, and
unsigned additions to a signed approval (an edit, a standing grant) make it count for
nothing; the tool does not run."""

from __future__ import annotations

import json
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent.approval_contracts import ApprovalSignal
from durable_agent.approver_tokens import ApproverKey, ApproverKeys
from durable_agent.decision_digest import decision_digest
from tests.support.agent_harness import running_worker, spec_for, wait_for
from tests.support.approval_fixtures import payments_registry
from tests.test_human_in_the_loop import TOOLS, pending_count, results, scripted


async def test_a_token_is_bound_to_the_run_the_decision_and_its_call(
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
            session = await agents.start(spec, "pay ann", session_id=f"pay-{task_queue}")
            [first] = await pending_count(agents, session, 1)
            old_run = await agents.run_chain(session)
            plain = ApprovalSignal(approval_id=first.approval_id)
            digest = decision_digest("approve", first.approval_id, old_run, first, plain)
            kept = alice.sign(session, first.approval_id, "approve", digest=digest)
            # that session ends; a new one starts under the same id, asking the same id
            await agents.end(session, by="ops")
            await agents.result(session)
            again = await agents.start(spec, "pay ann again", session_id=session)
            [second] = await pending_count(agents, again, 1)
            assert second.approval_id == first.approval_id
            assert await agents.run_chain(again) != old_run
            handle = client.get_workflow_handle(again)
            await handle.signal("approve", plain.model_copy(update={"token": kept}))
            # and in this run: a signed plain approval with an edit added unsigned
            run = await agents.run_chain(again)
            token = alice.sign(
                again, second.approval_id, "approve",
                digest=decision_digest("approve", second.approval_id, run, second, plain),
            )  # fmt: skip
            edited = plain.model_copy(
                update={"token": token, "arguments": {"to": "eve", "amount": 900}}
            )
            await handle.signal("approve", edited)

            async def both_refused() -> Any:
                status = await agents.status(again)
                return status.rejected_signals if len(status.rejected_signals) >= 2 else None

            refusals = await wait_for(both_refused, timeout=30)
            still = await agents.pending_approvals(again)
            # the signer's own client signs what it sends: that one counts
            await agents.approve(again, second.approval_id, key=alice)

            async def paid() -> Any:
                found = results(await agents.messages(again))
                return found or None

            [result] = await wait_for(paid, timeout=30)
    assert all("signed for another decision" in r for r in refusals), refusals
    assert [p.approval_id for p in still] == [second.approval_id], "nothing was decided"
    assert result.approval is not None and result.approval.verified
    assert ran == [("transfer", {"to": "ann", "amount": 1})], "only the signed call ran, once"
