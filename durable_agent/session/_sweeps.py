"""An "always" decision approves the other calls of its batch that wait and it covers,
one page per workflow task: one grant over thousands of waiting calls would otherwise test
and decide them all in the task its decision arrives in. The first page is decided
there and then (a batch of a page is decided at once); the rest, from the
loop, a short durable timer apart. Pure, like the Session it is part of."""

from __future__ import annotations

from collections.abc import Callable

from durable_agent.core import (
    ApprovalRecord,
    Grant,
    PendingApproval,
    ResolvedTool,
    as_validated,
    tests_hold,
)

from ._approvals import Approvals
from ._gate import Gate, arguments_of
from ._state import SessionState


class GrantSweeps:
    def __init__(
        self,
        state: SessionState,
        approvals: Approvals,
        gate: Gate,
        tools: Callable[[], dict[str, ResolvedTool]],
    ) -> None:
        self.state = state
        self.approvals = approvals
        self.gate = gate
        self._tools = tools

    def start(self, grant: Grant) -> None:
        """A new grant: its first page of the waiting calls decided now."""
        self.state.sweeps[grant.grant_id] = 0
        self.go_on()

    def go_on(self) -> None:
        """Decide the next page of a grant's sweep (the state's ``sweeps`` say what is left).
        A sweep goes on to calls asked after its grant (a batch asked in pages): the
        gate, deciding them then, would have let the grant approve them too."""
        sweeps, pending = self.state.sweeps, self.state.pending
        if not sweeps:
            return
        grant_id, start = next(iter(sweeps.items()))
        grant = self.gate.grant_named(grant_id)  # (revoked since: it approves no more)
        stop = start + self.approvals.page_for(len(pending) - start)
        if grant is not None:
            self._cover(grant, pending[start:stop])
        if grant is None or stop >= len(pending):
            del sweeps[grant_id]
        else:
            sweeps[grant_id] = stop

    def _cover(self, grant: Grant, waiting: list[PendingApproval]) -> None:
        """The calls among ``waiting`` that still wait and the grant covers, approved
        (their arguments judged only for a grant with tests; one record per rule)."""
        decided, tools = self.state.decisions, self._tools()
        records: dict[str | None, ApprovalRecord] = {}
        for pending in waiting:
            if pending.tool_name != grant.tool or pending.approval_id in decided:
                continue
            if grant.matching:
                tool = tools.get(pending.tool_name)
                schema = tool.definition.parameters if tool is not None else None
                arguments = as_validated(arguments_of(pending.arguments), schema)
                if not tests_hold(grant.matching, arguments):
                    continue
            record = records.get(pending.rule)
            if record is None:
                record = records[pending.rule] = self.gate.granted(grant, grant.at, pending.rule)
            self.approvals.decide(pending.approval_id, record)
