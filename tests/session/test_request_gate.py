"""Moves and budget raises go through the same gate as decisions (pure Session): an
agent whose handoffs are refused cannot be moved to, and where an approvers list
applies, a name nobody signed for (or one not on the list) moves nothing and raises
no budget; lowering a budget is anyone's to ask."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from durable_agent._contracts.boundary import BudgetSignal, MoveToAgentSignal
from durable_agent._session import Session, SessionState
from durable_agent._session.protocol import BudgetChanged, MoveRequested
from durable_agent._spec.document import AgentSpec

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def session(**approvals: Any) -> Session:
    spec = AgentSpec.model_validate(
        {
            "model": {"name": "m", "price": {"input_per_million": 1, "output_per_million": 1}},
            "stop": {"max_total_tokens": 1000},
            "swarm": {
                "agents": [
                    {"name": "front"},
                    {"name": "billing", "handoff_approval": "always"},
                    {"name": "vault", "handoff_approval": "deny"},
                ]
            },
            "approvals": approvals,
        }
    )
    return Session(spec, SessionState())


def limit(session: Session) -> int | None:
    budget = session.view.status().budget
    assert budget is not None
    return budget.max_total_tokens


def test_a_move_to_an_agent_whose_handoffs_are_refused_is_refused() -> None:
    open_to_all = session()
    problem = open_to_all.handle(MoveRequested(MoveToAgentSignal(agent="vault", by="ops")), NOW)
    assert problem is not None and "handing over to vault is refused" in problem
    assert open_to_all.view.status().move_pending is None
    assert open_to_all.handle(MoveRequested(MoveToAgentSignal(agent="billing")), NOW) is None
    assert open_to_all.view.status().move_pending is not None


def test_with_approvers_moves_and_raises_are_theirs_alone() -> None:
    guarded = session(approvers=["alice"])
    for by in (None, "mallory", "alice"):  # unsigned names prove nothing under a list
        problem = guarded.handle(MoveRequested(MoveToAgentSignal(agent="billing", by=by)), NOW)
        assert problem is not None and "a signed token is required" in problem
    assert guarded.view.status().move_pending is None
    raised = guarded.handle(BudgetChanged(BudgetSignal(max_total_tokens=10**6, by="alice")), NOW)
    assert raised is not None and "set_budget (a raise)" in raised
    assert limit(guarded) == 1000
    lowered = guarded.handle(BudgetChanged(BudgetSignal(max_total_tokens=500, by="mallory")), NOW)
    assert lowered is None and limit(guarded) == 500

    trusting = session(approvers=["alice"], accept_unsigned=True)
    stranger = trusting.handle(MoveRequested(MoveToAgentSignal(agent="billing", by="mallory")), NOW)
    assert stranger is not None and "mallory may not decide (approvers: alice)" in stranger
    assert (
        trusting.handle(MoveRequested(MoveToAgentSignal(agent="billing", by="alice")), NOW) is None
    )
    assert (
        trusting.handle(BudgetChanged(BudgetSignal(max_total_tokens=5000, by="alice")), NOW) is None
    )
    assert limit(trusting) == 5000
