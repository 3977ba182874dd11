"""The turn's tool batch: one result slot per call, allocated up front; the gate's verdict
on each call; the approvals people must give; the groups of calls to run; and the results
in request order, whatever order they finished in.

A batch of thousands is judged and asked one page per workflow task (``APPROVALS_PER_PAGE`` calls, a
short durable timer apart, ``PAGE_BREAK``): no task makes, describes or announces
thousands of approvals at once.

``OpenBatch`` holds what an open batch keeps (data only); ``ToolBatch`` decides."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import cast

from durable_agent._contracts.approvals import PendingApproval
from durable_agent._contracts.boundary import Handoff, ResolvedTool
from durable_agent._spec.approval_policy import describe_arguments
from durable_agent._spec.document import AgentSpec
from durable_agent._spec.secret_values import references
from durable_agent._spec.tool_kinds import session_kind
from durable_agent._wire.messages import (
    ApprovalDecision,
    ApprovalRecord,
    AssistantMessage,
    ToolCall,
    ToolMessage,
)

from .decisions import Approvals, Decisions, StandingGrants
from .gate import (
    Gate,
    Question,
    Verdicts,
    cancelled_result,
    denial_result,
    error_result,
    guardrail_denial,
    over_call_limit,
)
from .protocol import (
    AwaitApprovals,
    CheckApprovals,
    DescribeCalls,
    Pause,
    RunTools,
    ToolRun,
    ToolRuns,
)
from .requests import Requests
from .state import approval_id, epoch_ms, execution_groups
from .toolbox import Swarm, Toolbox
from .wake_ups import WakeUps

# What a tool batch holds while it is open: its calls and their slots, the page of
# calls being judged, the approvals people were asked, and what its results ask of the
# join. Data only; ``ToolBatch`` (below) decides.

@dataclass
class JudgedPage:
    """Calls ``start`` to ``stop`` of a batch, judged together: the predicates asked about
    them, the gate's verdicts, the calls that wait for a person and their readable forms.
    A batch of at most a page is one page; a larger one is judged one page per workflow task."""

    start: int
    stop: int
    questions: list[Question]
    """What predicates must answer before the gate can decide (asked once)."""
    verdicts: Verdicts | None = None
    waiting: list[int] = field(default_factory=list)
    """The page's calls that wait for a person, once gated."""
    descriptions: dict[int, str] | None = None
    """Readable forms of those calls, once described."""
    ended_a_task: bool = False
    """An activity (predicates, descriptions) ended a task in this page: the next page
    needs no timer of its own."""


@dataclass
class OpenBatch:
    """The open batch (the last assistant message's calls), as this run decides it.
    Not carried: a new run decides it again (approvals already asked keep their ids,
    deadlines and decisions, which the state carries)."""

    turn: int
    """The model turn whose reply asked for the calls (approval ids are made from it)."""
    calls: list[ToolCall]
    slots: list[ToolMessage | None]
    judged: int = 0
    """Calls judged so far, a page at a time (all of them, for a batch that runs
    unjudged)."""
    page: JudgedPage | None = None
    """The page being judged."""
    approvals: dict[int, ApprovalRecord] = field(default_factory=dict)
    rules: dict[int, str] = field(default_factory=dict)
    """The rule that asked for a person, by slot."""
    asked: dict[str, int] = field(default_factory=dict)
    """Approval id -> slot, as the pages' approvals were opened."""
    taken: int = 0
    """Of ``asked``, the decisions taken into the batch so far (one page per workflow task)."""
    decided: bool = False
    handoff: Handoff | None = None
    """Where the batch hands the conversation (a swarm), once its results are in."""
    unjudged: frozenset[str] | None = None
    """The tools called, when the gate let every call run unjudged (all slots wait for
    their run: nothing was decided call by call)."""
    noted: Noted | None = None
    """What the results placed so far ask of the join, noted as each was placed (from the
    batch's run on; a batch that never ran is noted when it finishes)."""


@dataclass
class Noted:
    """The results placed in a batch's slots, as the join needs them: how many, and the
    few it must look at again. A batch of thousands is then joined without a pass over
    its results in the task the last one arrives in."""

    filled: int = 0
    unstamped: list[int] = field(default_factory=list)
    """Slots the loop wrote (refused, denied, failed, cancelled): given the time then."""
    spent: list[int] = field(default_factory=list)
    """Slots whose result spent tokens on models (a sub-agent's)."""
    stops: list[int] = field(default_factory=list)
    """Slots whose result is a stop tool's (``stop.on_tools``), not an error."""


@dataclass(frozen=True)
class Joined:
    """A finished batch: its results in request order, where it hands the conversation,
    the results that spent tokens and the first stop tool's result."""

    results: list[ToolMessage]
    handoff: Handoff | None
    spent: list[ToolMessage]
    stop: ToolMessage | None


BatchCommand = CheckApprovals | DescribeCalls | Pause | AwaitApprovals | RunTools
#: The durable wait between two pages of a batch's judging or of a grant's approvals: it
#: ends the workflow task, so the next page is done in a task of its own.
PAGE_BREAK = timedelta(milliseconds=1)


class ToolBatch:
    """Decides one batch at a time; the Session feeds it events and takes its commands."""

    def __init__(
        self,
        spec: AgentSpec,
        gate: Gate,
        approvals: Approvals,
        sweeps: StandingGrants,
        decisions: Decisions,
        requests: Requests,
        toolbox: Toolbox,
        swarm: Swarm | None,
    ) -> None:
        """Keeps no slice of the carried state: a new run decides the open batch again
        from the array and the approvals carried."""
        self.spec = spec
        self.gate = gate
        self.approvals = approvals
        self.sweeps = sweeps
        self.decisions = decisions
        self.requests = requests
        self._toolbox = toolbox
        self.swarm = swarm
        self.open: OpenBatch | None = None
        self.children: set[str] = set()
        """The child sessions the open batch's sub-agent calls started (not carried:
        continue-as-new never comes inside a batch)."""
        self._called: tuple[AssistantMessage, frozenset[str]] | None = None
        self.wake_ups: WakeUps | None = None
        """The session's wake-ups, which carry out the wake-up tools' calls."""

    def tools_called(
        self, message: AssistantMessage, known: frozenset[str] | None = None
    ) -> frozenset[str]:
        """The names of the tools ``message`` calls, worked out once a reply (``known``:
        gathered as its pages were read, one page per workflow task): the rescue's check and the
        batch's opening both ask, and a reply of thousands is not gone over twice."""
        if known is not None:
            self._called = (message, known)
        elif self._called is None or self._called[0] is not message:
            names = frozenset(call.function.name for call in message.tool_calls or ())
            self._called = (message, names)
        return self._called[1]

    def running_children(self) -> set[str]:
        """The child sessions this batch's sub-agent calls run as (the workflow adds each
        as it starts it: ``children``)."""
        return set(self.children) if self.open is not None else set()

    @property
    def decided(self) -> bool:
        """People's decisions live in the open batch now (all, or the pages taken so far):
        it runs before anything else."""
        return self.open is not None and (self.open.decided or self.open.taken > 0)

    def next_command(self, last: AssistantMessage, turn: int, now: datetime) -> BatchCommand:
        """What the batch needs next: its next page judged (predicates, descriptions, the
        gate, people asked), a grant's next page of approvals, people, or its run."""
        if self.open is None:
            self.open = self._open(last, turn)
        batch = self.open
        while batch.judged < len(batch.calls):
            command = self._judge(batch, now)
            if command is not None:
                return command
        if batch.asked and not batch.decided:
            # a grant approves one page per workflow task (the first as it came)
            if self.sweeps.going:
                self.sweeps.go_on()
                return Pause(PAGE_BREAK)
            if not batch.taken:
                return AwaitApprovals(list(batch.asked))
            if self._take(batch, now):  # the decisions, taken one page per workflow task
                return Pause(PAGE_BREAK)
        return self._run(batch, now)

    # --- the gate ------------------------------------------------------------------------

    def _open(self, last: AssistantMessage, turn: int) -> OpenBatch:
        """A batch that needs nobody's judgment is judged whole by its tools; the gate
        judges any other a page at a time (``_judge``)."""
        calls = last.tool_calls or []
        slots: list[ToolMessage | None] = [None] * len(calls)
        limit = self.spec.stop.max_tool_calls_per_turn
        names, tools = self.tools_called(last), self._toolbox.active
        asked = self.approvals.asked()
        if len(calls) <= limit and not asked and self._all_unjudged(names, tools):
            # (a batch of thousands: judged by its tools, not call by call)
            return OpenBatch(turn, calls, slots, judged=len(calls), unjudged=names)
        return OpenBatch(turn, calls, slots)

    def _judge(self, batch: OpenBatch, now: datetime) -> BatchCommand | None:
        """The next step of the page being judged (a new page if none is): its
        predicates, the gate, its descriptions, then its people asked. ``None``: the page
        is done and the next may follow in this task (an activity ended the last)."""
        page = batch.page
        if page is None:
            start = batch.judged
            page = batch.page = self._page(
                batch, start, self.approvals.page_for(len(batch.calls) - start)
            )
            if page.questions:
                page.ended_a_task = True
                named = [p for _, p in page.questions]
                predicates = named if any(p is not None for p in named) else None
                return CheckApprovals([batch.calls[k] for k, _ in page.questions], predicates)
        if page.verdicts is None:
            self._gate(batch, page, {})
        describing = self._describing(batch, page.waiting)
        if describing and page.descriptions is None:
            page.ended_a_task = True
            return DescribeCalls([batch.calls[k] for k in describing])
        self._ask(batch, page, now)
        batch.judged, batch.page = page.stop, None
        if batch.judged < len(batch.calls) and not page.ended_a_task:
            return Pause(PAGE_BREAK)
        return None

    def _page(self, batch: OpenBatch, start: int, size: int) -> JudgedPage:
        """Calls ``start`` to ``start + size``: what needs nobody decided (over the limit,
        unknown); the predicates the gate needs for the rest."""
        page = JudgedPage(start, start + size, [])
        limit, calls = self.spec.stop.max_tool_calls_per_turn, batch.calls
        tools = self._toolbox.active
        for k in range(page.start, page.stop):
            call = calls[k]
            resolved = tools.get(call.function.name)
            if k >= limit:
                batch.slots[k] = error_result(call, over_call_limit(len(calls), limit))
            elif resolved is None:
                batch.slots[k] = error_result(call, self._not_registered(call.function.name))
            else:
                page.questions.extend(self.gate.questions(k, call, resolved))
        return page

    def _gate(self, batch: OpenBatch, page: JudgedPage, verdicts: Verdicts) -> None:
        """Each call of the page the gate decides: run (by policy, a rule or a standing
        grant), refused (the result says why), or waiting for a person."""
        page.verdicts = verdicts
        tools = self._toolbox.active
        pending = self.approvals.find_all() if self.approvals.asked() else {}
        for k in range(page.start, page.stop):
            call = batch.calls[k]
            if batch.slots[k] is not None:
                continue
            asked = pending.get(approval_id(batch.turn, k)) if pending else None
            if asked is not None:  # asked in an earlier run: its decision stands
                page.waiting.append(k)
                if asked.rule is not None:
                    batch.rules[k] = asked.rule
                continue
            outcome = self.gate.decide(k, call, tools[call.function.name], verdicts)
            if outcome.action == "deny" and outcome.rule is None:
                batch.slots[k] = guardrail_denial(call, outcome.reason or "")
            elif outcome.action == "deny":
                record = ApprovalRecord(decision="denied", rule=outcome.rule, reason=outcome.reason)
                batch.slots[k] = denial_result(call, record)
            elif outcome.action == "ask":
                page.waiting.append(k)
                if outcome.rule is not None:
                    batch.rules[k] = outcome.rule
            elif outcome.grant is not None:
                grant = outcome.grant
                batch.approvals[k] = self.gate.granted(grant, grant.at, outcome.rule)
            elif outcome.rule is not None:
                batch.approvals[k] = ApprovalRecord(decision="approved", rule=outcome.rule)

    def _all_unjudged(self, names: frozenset[str], tools: dict[str, ResolvedTool]) -> bool:
        """Every call is of a registered tool the gate lets run unjudged: nothing to ask
        and nothing to decide, whatever the arguments (``Gate.runs_unjudged``)."""
        for name in names:
            tool = tools.get(name)
            if tool is None or not self.gate.runs_unjudged(tool):
                return False
        return True

    def _not_registered(self, name: str) -> str:
        handoff = None if self.swarm is None else self.swarm.unknown_handoff(name)
        if handoff is not None:
            return handoff
        available = ", ".join(sorted(self._toolbox.active)) or "none"
        return f"Tool not registered: {name} (available: {available})"

    def approvals_checked(self, verdicts: list[bool]) -> None:
        """The predicates' answers to the page's questions, in order."""
        page = self._page_now()
        self._gate(self._current(), page, dict(zip(page.questions, verdicts, strict=True)))

    # --- people --------------------------------------------------------------------------

    def calls_described(self, descriptions: list[str]) -> None:
        """The tools' own readable forms of the page's calls that wait (``DescribeCalls``)."""
        page = self._page_now()
        describing = self._describing(self._current(), page.waiting)
        page.descriptions = dict(zip(describing, descriptions, strict=True))

    def _describing(self, batch: OpenBatch, waiting: list[int]) -> list[int]:
        """The waiting calls whose tools describe them."""
        tools = self._toolbox.active
        return [k for k in waiting if tools[batch.calls[k].function.name].describes]

    def _ask(self, batch: OpenBatch, page: JudgedPage, now: datetime) -> None:
        descriptions = page.descriptions or {}
        tools = self._toolbox.active
        opening: list[PendingApproval] = []
        for k in page.waiting:
            call = batch.calls[k]
            tool = tools[call.function.name]
            timeout = tool.policy.approval_timeout_seconds
            aid = approval_id(batch.turn, k)
            batch.asked[aid] = k
            name, arguments = call.function.name, call.function.arguments
            owned = tool.floor is not None and tool.floor.approvers is not None
            opening.append(
                PendingApproval(
                    approval_id=aid,
                    turn=batch.turn,
                    slot=k,
                    tool_name=name,
                    arguments=arguments,
                    requested_at=now,
                    deadline=now + timedelta(seconds=timeout) if timeout else None,
                    described_arguments=descriptions.get(k) or describe_arguments(name, arguments),
                    approvers=self.gate.approvers(tool),
                    rule=batch.rules.get(k),
                    signed_only=owned or None,
                    awaits_output=tool.policy.external_output or None,
                    run=self.decisions.run or None,
                )
            )
        self.approvals.open_all(opening)

    def timeout_decision(self, pending: PendingApproval) -> ApprovalDecision:
        """What a deadline decides for a call: its tool's default (a denial for a call
        whose output never came: there is nothing to run)."""
        policy = self._toolbox.active[pending.tool_name].policy
        decision: ApprovalDecision = policy.approval_timeout_decision
        return "denied" if policy.external_output else decision

    def approvals_waited(self, now: datetime) -> None:
        """The wait for the batch's approvals ended: all decided (deadlines included), the
        session is ending (the rest are denied), or a continue-as-new is due (the batch
        stays open, its approvals carried). Decided, the decisions are taken into the
        batch, one page per workflow task (``next_command`` takes the rest)."""
        batch = self._current()
        ids = list(batch.asked)
        ending = self.requests.ending
        if ending is not None:
            reason = ending.reason or "the session ended before a decision"
            self.approvals.close_all(ids, ending.by, reason, now)
        if not self.approvals.all_decided(ids):
            if not self.decisions.work_waiting():
                self.open = None  # decided again by the next run
            return
        self._take(batch, now)

    def _take(self, batch: OpenBatch, now: datetime) -> bool:
        """Take the next page of the batch's decisions out of the pending list into its slots (or
        its runs' approvals); whether a page is left (once none is, it is decided)."""
        ids = list(batch.asked)
        start = batch.taken
        taking = ids[start : start + self.approvals.page_for(len(ids) - start)]
        accepted_by_id = {aid: self.approvals.accepted(aid) for aid in taking}
        records = self.approvals.take_all(taking)
        for aid, record in zip(taking, records, strict=True):
            accepted, k = accepted_by_id[aid], batch.asked[aid]
            call = batch.calls[k]
            if record.decision == "denied":
                batch.slots[k] = denial_result(call, record)
            elif record.decision == "responded" and accepted is not None:
                batch.slots[k] = ToolMessage(
                    tool_call_id=call.id,
                    content=accepted.content or "",
                    tool_name=call.function.name,
                    is_error=True if accepted.is_error else None,
                    approval=record,
                    timestamp=int(now.timestamp() * 1000),
                    mode="tool",  # its output given from outside the tool
                )
            else:
                batch.approvals[k] = record
        batch.taken = start + len(taking)
        batch.decided = batch.taken == len(ids)
        return not batch.decided

    def cancel(self, last: AssistantMessage, turn: int, why: str, now: datetime) -> None:
        """Approvals this turn still has open are closed as denied; the calls without a
        result get one saying they were cancelled when the batch finishes."""
        if self.open is None:
            self.open = self._open(last, turn)
        open_ids = [p.approval_id for p in self.approvals.asked() if p.turn == turn]
        self.approvals.close_all(open_ids, None, why, now)
        self.approvals.take_all(open_ids)

    # --- running and joining -------------------------------------------------------------

    def _run(self, batch: OpenBatch, now: datetime) -> RunTools:
        tools, calls = self._toolbox.active, batch.calls
        batch.noted = Noted()
        if batch.unjudged is not None:  # every call approved, with nothing to look at
            approved, named = list(range(len(calls))), batch.unjudged
            batch.unjudged = None  # (run once: what arrives from now on fills slots)
        else:
            approved = [k for k, slot in enumerate(batch.slots) if slot is None]
            named = frozenset(calls[k].function.name for k in approved)
        # the session's own kinds (a swarm's handoffs, wake-ups): carried out here, not run; each
        # tool's kind is looked up once, not once a call
        ours = {n for n in named if session_kind(tools[n].target.kind).runs_in == "session"}
        wake_ups = {n for n in ours if tools[n].target.kind == "wake_ups"}
        ours -= wake_ups
        handoffs = [k for k in approved if calls[k].function.name in ours] if ours else []
        if handoffs and self.swarm is not None:  # the session runs these itself
            results, batch.handoff = self.swarm.handoff_results(calls, handoffs, tools)
            for k, result in results.items():
                batch.slots[k] = result.model_copy(update={"approval": batch.approvals.get(k)})
            approved = [k for k in approved if k not in results]
        wakes = [k for k in approved if calls[k].function.name in wake_ups] if wake_ups else []
        if wakes and self.wake_ups is not None:  # (the handoffs are out by now)
            results = self.wake_ups.tool_results(calls, wakes, tools, now)
            for k, result in results.items():
                batch.slots[k] = result.model_copy(update={"approval": batch.approvals.get(k)})
            approved = [k for k in approved if k not in results]
        if len(approved) < len(batch.slots):  # decided without running (a batch of
            self._note_placed(batch)  # thousands that all run has none to note)
        mode_of = {name: tools[name].policy.execution_mode for name in named}
        if all(mode == "parallel" for mode in mode_of.values()):
            in_groups = [approved] if approved else []  # one group (``execution_groups``)
        else:
            modes = [mode_of[calls[k].function.name] for k in approved]
            in_groups = execution_groups(approved, modes)
        make = self._tool_runs(batch)
        groups = [ToolRuns(group, make) for group in in_groups]
        return RunTools(batch.turn, groups, self.spec.session.max_concurrent_tool_calls)

    def _tool_runs(self, batch: OpenBatch) -> Callable[[int], ToolRun]:
        """How a slot's call is made into its ``ToolRun``, with everything it depends on
        taken now: the runs are made later, as runners take them (``ToolRuns``)."""
        tools, spec, approvals = self._toolbox.active, self.spec, dict(batch.approvals)
        calls = batch.calls
        active = None if self.swarm is None else self.swarm.active

        def make(slot: int) -> ToolRun:
            call = calls[slot]
            resolved = tools[call.function.name]
            approval = approvals.get(slot)
            if approval is not None and approval.arguments is not None:  # a person's edit
                function = call.function.model_copy(update={"arguments": approval.arguments})
                call = call.model_copy(update={"function": function})
            context = spec.context
            bound = {p: context[key] for p, key in resolved.bind.items() if key in context}
            uses = references(bound) or references(call.function.arguments)
            secrets = list(spec.secrets) if uses else []
            kind = session_kind(resolved.target.kind)  # the kind says what a call carries
            target = kind.call_target(resolved.target, spec)
            return ToolRun(
                slot, call, resolved, approval, bound, secrets, target, kind.runs_in, active
            )

        return make

    def arrived(self, slot: int, result: ToolMessage) -> None:
        """A call's result, as it arrives: placed in its slot and noted there."""
        batch = self._current()
        batch.slots[slot] = result
        self._note(batch, slot, result)

    def _note(self, batch: OpenBatch, slot: int, result: ToolMessage) -> None:
        noted = batch.noted
        assert noted is not None, "the batch's results are noted from its run on"
        noted.filled += 1
        if result.timestamp is None:
            noted.unstamped.append(slot)
        if result.usage is not None:
            noted.spent.append(slot)
        if not result.is_error and result.tool_name in self.spec.stop.on_tools:
            noted.stops.append(slot)

    def _note_placed(self, batch: OpenBatch) -> None:
        for k, slot in enumerate(batch.slots):
            if slot is not None:
                self._note(batch, k, slot)

    def finished(
        self, results: dict[int, ToolMessage], cancelled: str | None, now: datetime
    ) -> Joined:
        """The batch closed, with ``results`` (by slot) besides those that ``arrived``:
        its results in request order (calls a cancellation stopped get a result saying
        so) and where it hands the conversation, if it does. Results the loop wrote
        itself (refused, denied, failed, cancelled, handed off) get the time and
        ``mode`` ``tool`` here."""
        batch = self._current()
        if batch.noted is None:  # it never ran (cancelled while people were asked)
            batch.noted = Noted()
            self._note_placed(batch)
        for k, result in results.items():
            self.arrived(k, result)
        slots, noted = batch.slots, batch.noted
        if cancelled is not None and noted.filled < len(slots):
            for k, slot in enumerate(slots):
                if slot is None:
                    self.arrived(k, cancelled_result(batch.calls[k], cancelled))
        assert noted.filled == len(batch.calls), "one result per call"
        at = epoch_ms(now)
        for k in noted.unstamped:
            stamped = slots[k]
            assert stamped is not None
            slots[k] = stamped.model_copy(update={"timestamp": at, "mode": "tool"})
        in_order = cast(list[ToolMessage], list(slots))
        if self.swarm is not None:  # the activities' results carry it already
            agent = {"agent_name": self.swarm.active}
            in_order = [r if r.agent_name else r.model_copy(update=agent) for r in in_order]
        stop = in_order[min(noted.stops)] if noted.stops else None
        spent = [in_order[k] for k in sorted(noted.spent)]
        self.open = None
        self.children.clear()
        self.sweeps.clear()  # (a grant made while the batch was judged, then cancelled)
        return Joined(in_order, batch.handoff, spent, stop)

    def _current(self) -> OpenBatch:
        assert self.open is not None, "no tool batch is open"
        return self.open

    def _page_now(self) -> JudgedPage:
        page = self._current().page
        assert page is not None, "no page of the batch is being judged"
        return page
