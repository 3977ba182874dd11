"""The state continue-as-new carries: a slice per part of the Session, each written by
its part alone; and a state carried by a run recorded before the slices (one flat
object) reads into them, each field where its part finds it."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from durable_agent._session import SessionState

FLAT_STATES = Path(__file__).parent / "flat_states.json"
SESSION = Path(__file__).parent.parent.parent / "durable_agent" / "session"

#: Where each flat field is found in the sliced state, written out here rather than
#: taken from the code under test.
MOVED = {
    "pending": ("approvals", "pending"),
    "decisions": ("approvals", "decisions"),
    "accepted": ("approvals", "accepted"),
    "to_notify": ("approvals", "to_notify"),
    "grants": ("gate", "grants"),
    "grants_made": ("gate", "grants_made"),
    "unverified": ("decisions", "unverified"),
    "child_pending": ("decisions", "child_pending"),
    "forwards": ("decisions", "forwards"),
    "usage": ("budget", "usage"),
    "cost_usd": ("budget", "cost_usd"),
    "spend": ("budget", "spend"),
    "budget": ("budget", "limits"),
    "agent": ("swarm", "agent"),
    "agent_stack": ("swarm", "agent_stack"),
    "agent_tools": ("swarm", "agent_tools"),
    "inbox": ("requests", "inbox"),
    "injected": ("requests", "injected"),
    "rejected_signals": ("requests", "rejected_signals"),
    "ending": ("requests", "ending"),
    "flushes": ("requests", "flushes"),
    "move": ("requests", "move"),
    "rescues_this_reply": ("rescue", "attempts"),
    "rescue_after_tools": ("rescue", "after_tools"),
}


def _flat_states() -> list[tuple[str, dict[str, Any]]]:
    """The flat states that runs recorded before the slices carried in or out, as the
    histories of those runs held them (taken from them once: ``flat_states.json``, by
    history and event)."""
    return [(where, state) for where, state in json.loads(FLAT_STATES.read_text())]


FLAT = _flat_states()


def test_recorded_histories_carry_flat_states() -> None:
    assert len(FLAT) >= 10


@pytest.mark.parametrize(("where", "flat"), FLAT, ids=[w for w, _ in FLAT])
def test_a_flat_state_reads_into_the_slices(where: str, flat: dict[str, Any]) -> None:
    state = SessionState.model_validate(flat)
    moved: dict[str, Any] = {}
    for name, value in flat.items():
        part, field = MOVED.get(name, (None, name))
        if part is None:
            moved[name] = value
        else:
            moved.setdefault(part, {})[field] = value
    assert "pending" not in moved, where
    assert not state.message_ids  # runs before ids: the array stays as it was
    # each field where its part finds it, and nothing left behind
    assert SessionState.model_validate(moved) == state, where
    # the sliced state reads back as it is (the next run's input)
    sliced = state.model_dump(mode="json")
    assert "pending" not in sliced
    assert SessionState.model_validate(sliced) == state


def test_a_sliced_state_is_not_read_as_a_flat_one() -> None:
    """``decisions`` and ``budget`` name a slice now and a flat field before: a sliced
    state keeps them as slices."""
    sliced = SessionState.model_validate(
        {"decisions": {"forwards": []}, "budget": {"cost_usd": 1.5}, "gate": {"grants_made": 2}}
    )
    assert sliced.budget.cost_usd == 1.5 and sliced.gate.grants_made == 2
    with pytest.raises(ValueError, match="extra"):
        SessionState.model_validate({"approvals": {"pending": []}, "queued": 1})


def _state_types_named(module: Path) -> set[str]:
    """The names a module takes from ``._state``."""
    tree = ast.parse(module.read_text())
    return {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "_state" and node.level == 1
        for alias in node.names
    }


def test_each_part_is_given_its_own_slice_only() -> None:
    """Only the Session (and the package's face) sees the whole state; each part takes
    the type of its own slice, so it cannot write another's."""
    slices = {
        "_approvals.py": {"ApprovalsState"},
        "_gate.py": {"GateState"},
        "_decisions.py": {"DecisionsState", "Unverified"},
        "_budget.py": {"BudgetState"},
        "_swarm.py": {"SwarmState"},
        "_requests.py": {"RequestsState"},
        "_rescue.py": {"RescueState"},
    }
    for module in sorted(SESSION.glob("_*.py")):
        named = _state_types_named(module)
        if module.name in ("_session.py", "_state.py"):
            continue
        if module.name == "__init__.py":
            assert named <= {"SessionState"}
            continue
        assert "SessionState" not in named, f"{module.name} reaches the whole state"
        assert named == slices.get(module.name, set()), f"{module.name} takes {named}"
