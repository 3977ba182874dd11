"""Driving a Session one command at a time through the one executor (``carry_out_step``).

A ``Stepper`` is the in-process run's ``Effects`` with two changes: the test's people
act between steps (``decide``), and a model may answer from a list of outcomes. A wait
for approvals holds as the workflow's does, until the Session says it is over: the step
that began it returns while it holds, and the next step resumes it (the test decides in
between). Each command is kept in ``commands``, so a test reads what the Session asked
for and what came of it without carrying anything out itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from durable_agent._workflows.continuation import ContinuedInput

from durable_agent._contracts.approvals import ApprovalSignal
from durable_agent._session import (
    AwaitApprovals,
    CallModel,
    Command,
    Compatibility,
    ContinueAsNew,
    ModelOutcome,
    Session,
    SessionState,
    carry_out_step,
)
from durable_agent._session.protocol import DeadlinesPassed, DecisionArrived, ToolsResolved
from durable_agent._spec.document import AgentInput
from durable_agent._wire.messages import RecordedDecision
from durable_agent.testing._in_process import InProcessRun


@dataclass
class Stepper(InProcessRun):
    outcomes: list[ModelOutcome] = field(default_factory=list)
    """What the model calls answer, in order, before ``model`` is asked."""
    suggest: bool = False
    """What the executor tells the Session of a continue-as-new before each step."""
    commands: list[Command] = field(default_factory=list)
    on_command: Callable[[Command], object] | None = None
    """Told each command before it is carried out (a test reads the state there)."""
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False)
    _step: asyncio.Future[Any] | None = field(default=None, init=False)
    _held: asyncio.Event | None = field(default=None, init=False)

    def open(
        self,
        message: str,
        state: SessionState | None = None,
        compatibility: Compatibility | None = None,
        **request: Any,
    ) -> Session:
        """A fresh session with the spec's tools as ``registry`` has them, started."""
        session = self.session = Session(self.spec, state or SessionState(), compatibility)
        self.tools_resolved()
        session.start(AgentInput(spec=self.spec, message=message, **request), self.clock)
        return session

    def tools_resolved(self) -> None:
        problem = self.session.handle(ToolsResolved(self._resolved(self.session)), self.clock)
        assert problem is None, problem

    def step(self) -> Command:
        """Carry out one command (or go on with a wait for approvals that held); the
        latest command."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._advance())
        if self._step is None:  # nothing holds: the loop is not needed until the next step
            self._loop.close()
            self._loop = None
        return self.commands[-1]

    async def _advance(self) -> None:
        if self._step is None:
            self._step = asyncio.ensure_future(carry_out_step(self.session, self))
        elif self._held is not None:
            self._held.set()  # the wait looks again
        while not self._step.done():
            await asyncio.sleep(0)
            if self._held is not None and not self._held.is_set():
                return  # the wait holds: people act before the next step
        step, self._step = self._step, None
        step.result()

    def step_until(self, *kinds: type) -> Command:
        """Steps until a command of one of ``kinds`` has been carried out; that command."""
        while not isinstance(command := self.step(), kinds):
            pass
        return command

    def hand_over(self) -> SessionState:
        """Continue as new now (a wait that holds ends with the run): the next run's
        state, carried through JSON as Temporal carries it; the steps go on in it."""
        if self._step is not None:
            step, self._step, self._held = self._step, None, None
            step.cancel()
            assert self._loop is not None
            self._loop.run_until_complete(asyncio.wait([step]))
            self._loop.close()
            self._loop = None
        carried = ContinuedInput(spec=self.session.spec, carried=self.session.for_next_run())
        again = ContinuedInput.model_validate_json(carried.model_dump_json())
        self.session = Session(again.spec, again.carried)
        return again.carried

    def decide(
        self, approval_id: str, decision: RecordedDecision = "approved", **signal: Any
    ) -> str | None:
        """A person's decision, as the workflow's handler hands it over."""
        sent = ApprovalSignal(approval_id=approval_id, **{"by": "ops", **signal})
        return self.session.handle(DecisionArrived(sent, decision), self.clock)

    def deadlines_pass(self, ids: list[str], now: datetime) -> bool:
        """A page of ``ids`` past their deadline at ``now`` take their defaults, as the
        workflow's wait tells the Session; whether more than a page passed."""
        self.session.handle(DeadlinesPassed(ids), now)
        return self.session.view.approvals.defaults_left

    # --- the effects that differ from an in-process run --------------------------------

    def continue_suggested(self) -> bool:
        return self.suggest

    async def before(self, command: Command) -> None:
        self.commands.append(command)
        if self.on_command is not None:
            self.on_command(command)

    async def call_model(self, command: CallModel) -> ModelOutcome:
        if self.outcomes:
            return self.outcomes.pop(0)
        return await super().call_model(command)

    async def continue_as_new(self, command: ContinueAsNew) -> None:
        """Nothing: a test that goes on in a fresh run says so (``hand_over``)."""

    async def await_approvals(self, command: AwaitApprovals) -> None:
        """Holds until the Session says the wait is over (people decide between steps)."""
        while not self.session.view.approvals_wait_over(command.ids, self.suggest):
            self._held = asyncio.Event()
            await self._held.wait()
        self._held = None
