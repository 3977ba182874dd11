"""An "always" decision approves the other calls of its batch that wait and it covers,
one page per workflow task: one grant over thousands of waiting calls would otherwise test
and decide them all in the task its decision arrives in. The first page is decided
there and then (a batch of a page is decided at once); the rest, from the
loop, a short durable timer apart. Pure, like the Session it is part of."""

from __future__ import annotations

from durable_agent._contracts._approval_contracts import Grant, PendingApproval
from durable_agent._session._schema_values import as_validated
from durable_agent._spec._approval_policy import tests_hold
from durable_agent._wire._messages import ApprovalRecord

from ._approvals import Approvals
from ._gate import Gate, arguments_of
from ._toolbox import Toolbox


class StandingGrants:
    def __init__(
        self,
        sweeps: dict[str, int],
        approvals: Approvals,
        gate: Gate,
        toolbox: Toolbox,
    ) -> None:
        self._sweeps = sweeps
        """Its slice of the session state: by grant id, how far into the pending calls
        each sweep has come."""
        self.approvals = approvals
        self.gate = gate
        self._toolbox = toolbox

    @property
    def going(self) -> bool:
        """A grant still has calls to approve (the next page waits for its task)."""
        return bool(self._sweeps)

    def clear(self) -> None:
        """The batch is over: whatever a sweep had left to approve left with it."""
        self._sweeps.clear()

    def start(self, grant: Grant) -> None:
        """A new grant: its first page of the waiting calls decided now."""
        self._sweeps[grant.grant_id] = 0
        self.go_on()

    def go_on(self) -> None:
        """Decide the next page of a grant's sweep (the slice says what is left).
        A sweep goes on to calls asked after its grant (a batch asked in pages): the
        gate, deciding them then, would have let the grant approve them too."""
        sweeps, pending = self._sweeps, self.approvals.asked()
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
        decided, tools = self.approvals.decided(), self._toolbox.active
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
