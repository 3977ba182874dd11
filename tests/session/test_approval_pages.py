"""A batch of more calls than a page that wait for people is judged, asked, approved by
a grant and taken one page per workflow task, a short durable timer apart; a batch of a page
is done as it always was. Pure tests of the Session (pages of four), then one session on
the real dev server at the real page size, whose history the replay suite keeps."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from durable_agent._workflows.patches import (
    APPROVALS_IN_PAGES_PATCH,
    CALLS_IN_PAGES_PATCH,
    PREVIOUS_BASELINE,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client import handle as client_module
from durable_agent._client.handle import SessionHandle
from durable_agent._contracts.events import ApprovalDecided, ApprovalRequested, ToolStarted
from durable_agent._session import (
    PAGE_BREAK,
    AwaitApprovals,
    CallModel,
    Command,
    Compatibility,
    DescribeCalls,
    NotifyEscalation,
    Pause,
    RunTools,
    SessionState,
)
from durable_agent._session import decisions as approval_books
from durable_agent._session import view as session_view
from durable_agent._spec.document import AgentSpec
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.support.agent_harness import record_history, running_worker, spec_for, wait_for
from tests.support.approval_fixtures import Call, payments_registry
from tests.support.session_steps import Stepper

PAGE = 4


@pytest.fixture
def pages_of_four(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(approval_books, "APPROVALS_PER_PAGE", PAGE)


def opened(
    calls: list[Call], compatibility: Compatibility | None = None, **settings: Any
) -> tuple[Stepper, SessionState]:
    """A session whose model just asked for ``calls`` in one batch (``settings``: the
    spec's beside its tools), driven through the executor, and its state (as the
    workflow would carry it)."""
    transfer = {"name": "transfer", "approval_timeout_seconds": 60}
    spec = AgentSpec.model_validate(
        {
            "model": {"name": "m"},
            "tools": [transfer, "refund", "lookup"],
            "session": {"end_after_reply": True},
            **settings,
        }
    )
    replies = iter([assistant_calls(*calls)])
    driver = Stepper(
        spec, payments_registry([], []), lambda body: next(replies, assistant_text("ok"))
    )
    state = SessionState()
    driver.open("pay", state, compatibility)
    assert isinstance(driver.step(), CallModel)
    return driver, state


def until_waiting(driver: Stepper) -> list[Command]:
    """The batch's commands until it waits for people or runs (the workers describing
    the calls that wait)."""
    first = len(driver.commands)
    driver.step_until(AwaitApprovals, RunTools)
    seen = driver.commands[first:]
    assert all(isinstance(c, Pause | DescribeCalls) for c in seen[:-1]), seen
    return seen


def transfers(count: int) -> list[Call]:
    return [("transfer", {"to": f"acct-{k}", "amount": k}) for k in range(count)]


@pytest.mark.usefixtures("pages_of_four")
def test_a_batch_over_a_page_is_judged_and_asked_a_page_a_task() -> None:
    """Ten calls in pages of four: a timer after a page that ended no task of its own,
    none after one an activity ended (its descriptions); each page opens only its own
    approvals; the wait is for all ten, in request order."""
    calls = transfers(5) + [("refund", {"invoice": k}) for k in range(5)]
    driver, state = opened(calls)
    opened_at: list[int] = []
    driver.on_command = lambda command: opened_at.append(len(state.approvals.pending))
    commands = until_waiting(driver)
    kinds = [type(c).__name__ for c in commands]
    assert kinds == ["Pause", "DescribeCalls", "DescribeCalls", "AwaitApprovals"]
    assert commands[0] == Pause(PAGE_BREAK)
    # the first page asked four; the second described its refunds (5..7) before asking
    assert opened_at == [4, 4, 8, 10]
    described = [c for c in commands if isinstance(c, DescribeCalls)]
    assert [[json.loads(c.function.arguments)["invoice"] for c in d.calls] for d in described] == [
        [0, 1, 2],
        [3, 4],
    ]
    last = commands[-1]
    assert isinstance(last, AwaitApprovals)
    assert last.ids == [f"turn1-call{k}" for k in range(10)]
    assert [p.slot for p in state.approvals.pending] == list(range(10))
    refund = driver.session.view.approvals.by_id().get("turn1-call6")
    assert refund is not None
    assert refund.described_arguments == "Refund invoice 1 to the customer's card"


@pytest.mark.usefixtures("pages_of_four")
def test_one_always_approves_the_rest_a_page_a_task_and_they_run_once() -> None:
    """One "always" over ten waiting calls: its own page decided with it, the rest a page
    each after a timer, the decisions taken into the batch one page per workflow task; then all ten
    run, each approved by the grant."""
    driver, state = opened(transfers(10))
    view = driver.session.view
    assert isinstance(until_waiting(driver)[-1], AwaitApprovals)
    assert driver.decide("turn1-call0", always="tool") is None
    assert len(state.approvals.decisions) == PAGE and state.sweeps == {"grant-1": PAGE}
    assert view.approvals_wait_over([f"turn1-call{k}" for k in range(10)], False)
    driver.step()  # the wait ends for the next page (not all decided: the batch stays open)
    decided = []
    driver.on_command = lambda command: decided.append(len(state.approvals.decisions))
    commands = [driver.step() for _ in range(3)]
    assert commands[:2] == [Pause(PAGE_BREAK), Pause(PAGE_BREAK)]
    assert isinstance(commands[2], AwaitApprovals)
    assert decided == [8, 10, 10] and not state.sweeps
    assert len(state.approvals.pending) == 10 - PAGE  # the first page taken into the batch
    taken = []
    driver.on_command = lambda command: taken.append(len(state.approvals.pending))
    command = driver.step_until(RunTools)
    assert taken == [2, 0]  # the second page; the third taken as the batch runs
    assert not state.approvals.pending and not state.approvals.decisions
    assert isinstance(command, RunTools)
    runs = [run for group in command.groups for run in group]
    assert [r.slot for r in runs] == list(range(10))
    assert all(r.approval is not None and r.approval.grant == "grant-1" for r in runs)
    assert [m.approval.grant for m in driver.session.messages[-10:]] == ["grant-1"] * 10


@pytest.mark.usefixtures("pages_of_four")
def test_a_grant_made_while_pages_are_asked_covers_the_later_pages_too() -> None:
    """The grant arrives after the first page was asked: the later pages' calls are
    approved by it as the gate judges them, never asked."""
    driver, state = opened(transfers(10))
    assert driver.step() == Pause(PAGE_BREAK)
    assert driver.decide("turn1-call0", always="tool") is None
    assert len(state.approvals.decisions) == PAGE and not state.sweeps
    command = until_waiting(driver)[-1]
    assert isinstance(command, AwaitApprovals) and len(state.approvals.pending) == 0
    command = driver.step()
    assert isinstance(command, RunTools)
    runs = [run for group in command.groups for run in group]
    assert [r.slot for r in runs] == list(range(10))
    assert all(r.approval is not None and r.approval.grant == "grant-1" for r in runs)


@pytest.mark.usefixtures("pages_of_four")
def test_a_grants_sweep_goes_on_after_continue_as_new() -> None:
    """The run hands over with the grant's sweep one page in: the next run asks nobody
    again, and the sweep approves the rest."""
    driver, _ = opened(transfers(10))
    until_waiting(driver)
    driver.decide("turn1-call0", always="tool")
    next_state = driver.hand_over()
    assert next_state.sweeps == {"grant-1": PAGE}
    asked_before = {p.approval_id: p.requested_at for p in next_state.approvals.pending}
    assert len(asked_before) == 10
    asked_again: list[str] = []
    driver.on_command = lambda command: asked_again.extend(
        p.approval_id
        for p in next_state.approvals.pending
        if asked_before.get(p.approval_id) != p.requested_at
    )
    first = len(driver.commands)
    command = driver.step_until(RunTools)
    assert all(isinstance(c, Pause | AwaitApprovals) for c in driver.commands[first:-1])
    assert asked_again == []  # nobody asked anew
    assert isinstance(command, RunTools)
    runs = [run for group in command.groups for run in group]
    assert [r.slot for r in runs] == list(range(10))
    assert all(r.approval is not None and r.approval.grant == "grant-1" for r in runs)


@pytest.mark.usefixtures("pages_of_four")
def test_deadlines_that_pass_together_are_decided_a_page_a_task() -> None:
    """Ten deadlines pass at once: a page of defaults at a time (the workflow waits a
    timer between); with an escalation, a page of first deadlines extended at a time,
    each page's second group told before the next."""
    driver, state = opened(transfers(10))
    until_waiting(driver)
    ids, later = [f"turn1-call{k}" for k in range(10)], driver.clock + timedelta(seconds=61)
    pages = [driver.deadlines_pass(ids, later) for _ in range(3)]
    assert pages == [True, True, False]
    assert driver.session.view.approvals_wait_over(ids, False)
    assert all(aid in state.approvals.decisions for aid in ids)
    assert {r.decision for r in state.approvals.decisions.values()} == {"denied"}
    assert all(r.timed_out for r in state.approvals.decisions.values())

    escalation = {"extend_seconds": 600, "notify": ["oncall"], "notifier": "page_oncall"}
    driver, state = opened(transfers(10), approvals={"escalation": escalation})
    until_waiting(driver)
    assert driver.deadlines_pass(ids, later)
    assert len(state.approvals.to_notify) == PAGE and not state.approvals.decisions
    assert driver.session.view.approvals_wait_over(ids, False)  # told before the next page
    driver.clock = later
    driver.step()  # the wait ends
    command = driver.step()
    assert isinstance(command, NotifyEscalation)
    assert [p.slot for p in command.notice.approvals] == [0, 1, 2, 3]
    assert driver.notices == [command.notice]  # the executor told the second group
    assert driver.deadlines_pass(ids, later)
    assert not driver.deadlines_pass(ids, later)
    assert [p.escalated_to for p in state.approvals.pending] == [["oncall"]] * 10


def test_a_batch_of_a_page_is_asked_and_approved_at_once() -> None:
    """At most a page (the real one): no timer, and one "always" decides the rest in
    the task its decision arrives in, as before pages."""
    driver, state = opened(transfers(approval_books.APPROVALS_PER_PAGE))
    assert driver.step() == AwaitApprovals(
        [f"turn1-call{k}" for k in range(approval_books.APPROVALS_PER_PAGE)]
    )  # it holds: nobody has decided
    driver.decide("turn1-call0", always="tool")
    assert len(state.approvals.decisions) == approval_books.APPROVALS_PER_PAGE
    assert not state.sweeps
    assert isinstance(driver.step(), AwaitApprovals)  # the wait ends, the decisions taken
    assert isinstance(driver.step(), RunTools)


def test_where_pages_begin_the_workflow_is_told(pages_of_four: None) -> None:
    """Ten calls that wait, in pages of four: the hook the workflow consumes the previous
    release's marker with is called (it recorded one there), and the batch is asked a
    page at a time all the same."""
    told: list[int] = []
    compatibility = Compatibility(approvals_in_pages=lambda: told.append(1))
    driver, state = opened(transfers(10), compatibility)
    command = driver.step()
    assert told, "told where the pages begin"
    assert isinstance(command, Pause) and command == Pause(PAGE_BREAK), command
    assert len(state.approvals.pending) == 4, "the first page alone is asked"


noted: list[int] = []
notes = Registry()
CALLS = 260
"""A page and ten: two pages of everything, at the real page size."""


@tool(registry=notes, approval="always")
def note(n: int) -> str:
    """Note a number down (once a person agrees)."""
    noted.append(n)
    return f"noted {n}"


async def test_a_batch_over_a_page_on_the_real_server(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """260 calls that wait: asked in two pages, one "always" approves them all, each runs
    once and pairs in request order. Every call's approval is announced asked, then
    decided, then its tool started; the history holds the patch's marker and the timers
    between pages (each of ``PAGE_BREAK``). The client reads the waiting calls a page a
    query; ``status`` lists the first of them and counts all."""
    monkeypatch.setattr(client_module, "PENDING_PAGE", 100)
    monkeypatch.setattr(session_view, "STATUS_PENDING_SHOWN", 100)
    noted.clear()
    script = [assistant_calls(*[("note", {"n": n}) for n in range(CALLS)]), assistant_text("ok")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["note"], stop={"max_tool_calls_per_turn": CALLS})
        async with running_worker(temporal_env, task_queue, notes) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "note them")
            pending = await wait_for(lambda: _waiting(agents, sid), timeout=120)
            asked = _pages_asked(monkeypatch)
            assert [p.slot for p in await agents.session(sid).pending_approvals()] == list(
                range(CALLS)
            )
            assert asked == [(0, 100), (100, 100), (200, 100)]
            status = await agents.session(sid).status()
            await agents.session(sid).approve(pending[0].approval_id, by="ops", always="tool")
            result = await agents.session(sid).result()
            events = [e async for e in agents.session(sid).follow()]
            messages = await agents.session(sid).messages()
            handle = agents.temporal.get_workflow_handle(sid)
            await record_history(handle, "approvals_in_pages")
            history = await handle.fetch_history()
    assert result.status == "done", result.error
    assert sorted(noted) == list(range(CALLS))  # each ran once
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.content for m in results] == [f"noted {n}" for n in range(CALLS)]
    assert all(m.approval is not None and m.approval.grant == "grant-1" for m in results)
    assert [p.slot for p in pending] == list(range(CALLS))
    assert status.pending_count == CALLS and len(status.pending_approvals) == 100
    assert [p.slot for p in status.pending_approvals] == list(range(100))

    at: dict[tuple[str, int], list[int]] = {}
    for offset, event in enumerate(events):
        if isinstance(event, ApprovalRequested):
            at.setdefault(("asked", event.approval.slot), []).append(offset)
        elif isinstance(event, ApprovalDecided):
            slot = int(event.approval_id.rsplit("call", 1)[1])
            at.setdefault(("decided", slot), []).append(offset)
        elif isinstance(event, ToolStarted):
            at.setdefault(("started", event.slot), []).append(offset)
    for slot in range(CALLS):
        [asked], [decided], [started] = (
            at[(kind, slot)] for kind in ("asked", "decided", "started")
        )
        assert asked < decided < started, slot

    assert APPROVALS_IN_PAGES_PATCH in patches_of(history)
    timers = [
        e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]
    # one between the two pages asked, one between the grant's two pages (its first
    # decided with it); the two pages taken in one task, the second as the batch runs
    assert timers == [PAGE_BREAK, PAGE_BREAK], timers


def _pages_asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The pages the client asks ``pending_approvals`` for from now on."""
    asked: list[tuple[int, int]] = []
    query = SessionHandle._query

    async def spied(self: SessionHandle, name: str, kind: Any, *args: Any) -> Any:
        if name == "pending_approvals":
            asked.append(args)
        return await query(self, name, kind, *args)

    monkeypatch.setattr(SessionHandle, "_query", spied)
    return asked


def patches_of(history: WorkflowHistory) -> list[str]:
    """The patch ids the run's markers record."""
    markers = [
        e.marker_recorded_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]
    data = [m.details["patch-data"] for m in markers if m.marker_name == "core_patch"]
    return [json.loads(d.payloads[0].data)["id"] for d in data]


async def _waiting(agents: AgentClient, sid: str) -> Any:
    return await _waiting_for(agents, sid, CALLS)


async def test_a_batch_of_a_few_records_no_marker_and_no_timer(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Three calls that wait, one "always": no timer, and no marker of pages."""
    noted.clear()
    script = [assistant_calls(*[("note", {"n": n}) for n in range(3)]), assistant_text("ok")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["note"])
        async with running_worker(temporal_env, task_queue, notes) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "note them")
            pending = await wait_for(lambda: agents.session(sid).pending_approvals(), timeout=60)
            await agents.session(sid).approve(pending[0].approval_id, by="ops", always="tool")
            assert (await agents.session(sid).result()).status == "done"
            history = await agents.temporal.get_workflow_handle(sid).fetch_history()
    assert sorted(noted) == [0, 1, 2]
    kinds = {e.event_type for e in history.events}
    assert EventType.EVENT_TYPE_TIMER_STARTED not in kinds
    # the previous release's markers consumed where its runs recorded them (deprecated
    # here); none for approvals in pages
    assert patches_of(history) == [PREVIOUS_BASELINE, CALLS_IN_PAGES_PATCH]


async def test_a_sub_agents_batch_over_a_page_shows_in_its_parent_a_page_a_signal(
    temporal_env: WorkflowEnvironment, task_queue: str, pages_of_four: None
) -> None:
    """A child session's ten waiting calls reach its parent in three signals (pages of
    four, the later ones adding to the first); decided there one by one, each runs once
    in the child, and the parent's list empties."""
    noted.clear()
    child_instructions = "You note numbers down."

    def answer(request: RecordedRequest) -> Any:
        messages = request.body["messages"]
        answered = any(m["role"] == "tool" for m in messages)
        if messages[0] == {"role": "system", "content": child_instructions}:
            if answered:
                return assistant_text("Noted.")
            return assistant_calls(*[("note", {"n": n}) for n in range(10)])
        if answered:
            return assistant_text("The clerk noted them.")
        return assistant_calls(("clerk", {"task": "note ten numbers"}))

    with ScriptedProvider(responder=answer) as provider:
        child = spec_for(provider, ["note"], instructions=child_instructions).model_dump()
        clerk = [{"name": "clerk", "description": "Notes numbers", "spec": child}]
        spec = spec_for(provider, [], agents=clerk, session={"end_after_reply": True})
        async with running_worker(temporal_env, task_queue, notes) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "note ten numbers")
            pending = await wait_for(lambda: _waiting_for(agents, sid, 10), timeout=60)
            for each in pending:
                await agents.session(sid).approve(each.approval_id, by="ops")
            result = await agents.session(sid).result()
            status = await agents.session(sid).status()
            run = (await agents.session(sid).run_chain())[:8]
            child_history = await agents.temporal.get_workflow_handle(
                f"{sid}--clerk-t1c0-{run}"
            ).fetch_history()
    assert result.final is not None and result.final.content == "The clerk noted them."
    assert sorted(noted) == list(range(10)) and status.pending_approvals == []
    assert [p.approval_id.rsplit("/", 1)[1] for p in pending] == [
        f"turn1-call{k}" for k in range(10)
    ]
    signals = [
        e.signal_external_workflow_execution_initiated_event_attributes
        for e in child_history.events
        if e.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
    ]
    reports = [json.loads(s.input.payloads[0].data) for s in signals]
    sizes = [(len(r["pending"]), r.get("continued", False)) for r in reports]
    # the ten asked (4, 4, 2), then none left once all were decided
    assert sizes == [(4, False), (4, True), (2, True), (0, False)], sizes


async def _waiting_for(agents: AgentClient, sid: str, count: int) -> Any:
    pending = await agents.session(sid).pending_approvals()
    return pending if len(pending) == count else None
