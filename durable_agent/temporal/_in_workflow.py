"""Running an agent from inside your own workflow, with a typed result.

``run_agent`` runs it inline: the Session's loop in your workflow, its model and tool
calls your workflow's activities (served by any worker with ``DurableAgentPlugin``), a
worker crash retried as any activity is. ``AgentRun`` is the same with a handle your
update handlers can decide its waiting calls through. ``run_child_agent`` runs it as a
child session instead: a workflow of its own that people find, read and approve by its
id, your history holding only its start and end.

Import it in workflow code as you would any pure module::

    with workflow.unsafe.imports_passed_through():
        from durable_agent.temporal import run_agent

    result = await run_agent(fraud_check, f"Check order {order_id}")
    verdict = result.output  # an instance of fraud_check's output_type

A run that ends without a usable answer raises ``AgentRunError``, which fails your
workflow (the plugin declares it a workflow failure) unless you catch it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Generic, TypeVar, overload

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._agents import Agent, RunResult
    from durable_agent._contracts.approvals import (
        DecisionRequest,
        DecisionResult,
        PendingApproval,
    )
    from durable_agent._contracts.boundary import WORKFLOW_NAME, AgentResult, AgentRunError
    from durable_agent._spec.document import AgentInput, AgentSpec
    from durable_agent._wire.messages import Message, UserMessage
    from durable_agent._workflows.inline import Approver, InlineRun

OutputT = TypeVar("OutputT")


class AgentRun(Generic[OutputT]):
    """An inline run you keep a handle on. ``agent``: an ``Agent`` (the output typed by its
    ``output_type``) or a spec (the output the answer's text, or the parsed object when
    it has an ``output_schema``). Make it in your workflow's ``__init__``,  let
    your update handlers pass people's decisions to ``decide`` (and your queries read
    ``pending``), and ``await run(...)`` it from your ``run``::

        @workflow.init
        def __init__(self, order_id: str) -> None:
            self.check = AgentRun(fraud_check)

        @workflow.update
        async def decide(self, decision: DecisionRequest) -> DecisionResult:
            return await self.check.decide(decision)
    """

    def __init__(self, agent: Agent[OutputT] | AgentSpec, *, approver: Approver | None = None):
        self._agent = agent
        self._inline = InlineRun(_spec_of(agent), approver=approver)

    def pending(self) -> list[PendingApproval]:
        """The calls waiting for a person."""
        return self._inline.pending()

    async def decide(self, request: DecisionRequest) -> DecisionResult:
        """A person's decision on a waiting call; refused (``ApplicationError``, the
        reason first) as the session's ``decide`` update refuses it."""
        return await self._inline.decide(request)

    async def run(
        self, message: str | UserMessage, *, history: Sequence[Message] = ()
    ) -> RunResult[OutputT]:
        """The typed answer, and the run's messages (``history`` for a next run)."""
        result = await self._inline.run(message, history=history)
        run_id = workflow.info().workflow_id
        typed: RunResult[OutputT] = _typed(self._agent, run_id, result)
        return RunResult(typed.session_id, typed.output, typed.result, self._inline.messages)


async def run_agent(
    agent: Agent[OutputT] | AgentSpec,
    message: str | UserMessage,
    *,
    history: Sequence[Message] = (),
    approver: Approver | None = None,
) -> RunResult[OutputT]:
    """Run ``agent`` inline in the calling workflow to its answer. ``history``: messages
    to go on from (a previous run's ``messages``); ``approver``: decides each call that
    waits for a person (without one, such a call waits for ``AgentRun.decide``, which
    this form gives no handle to: use ``AgentRun``)."""
    return await AgentRun(agent, approver=approver).run(message, history=history)


def agent_session_id(name: str) -> str:
    """A child's id: the calling workflow's id and ``name``, so a person can find the
    session (to approve its calls) from the workflow they know."""
    return f"{workflow.info().workflow_id}--{name}"


async def start_child_agent(
    agent: Agent[Any] | AgentSpec,
    message: str | UserMessage,
    *,
    name: str = "agent",
    one_reply: bool = True,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
) -> workflow.ChildWorkflowHandle[Any, AgentResult]:
    """Start a session as a child of the calling workflow; returns once the child runs
    (its handle's ``id`` is the session id, ``agent_session_id(name)``). People decide
    its calls on that id (``AgentClient.session(id).decide``, or the ``approve``,
    ``deny`` and ``respond`` signals, each ``{"approval_id": ..., "by": ...}``); the
    child tells the calling workflow the calls that wait with the ``child_approvals`` signal
    (``ChildApprovals``), which a workflow without a handler of that name ignores.
    ``one_reply``: the session ends after its answer (otherwise it waits for more
    messages until it is ended, as any session). ``task_queue``: where the session's
    workers listen (default: the calling workflow's queue)."""
    spec = _spec_of(agent)
    if one_reply:
        rules = spec.session.model_copy(update={"end_after_reply": True})
        spec = spec.model_copy(update={"session": rules})
    return await workflow.start_child_workflow(
        WORKFLOW_NAME,
        AgentInput(spec=spec, message=message),
        id=agent_session_id(name),
        result_type=AgentResult,
        task_queue=task_queue,
        execution_timeout=execution_timeout,
        static_summary=f"agent session {name}",
    )


async def run_child_agent(
    agent: Agent[OutputT] | AgentSpec,
    message: str | UserMessage,
    *,
    name: str = "agent",
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
) -> RunResult[OutputT]:
    """Run ``agent`` as a child session to its answer; typed as ``run_agent``'s."""
    handle = await start_child_agent(
        agent, message, name=name, task_queue=task_queue, execution_timeout=execution_timeout
    )
    result: AgentResult = await handle
    typed: RunResult[OutputT] = _typed(agent, handle.id, result)
    return typed


def _spec_of(agent: Agent[Any] | AgentSpec | dict[str, Any]) -> AgentSpec:
    if isinstance(agent, Agent):
        return agent.spec(one_reply=True)
    if isinstance(agent, dict):
        return AgentSpec.model_validate(agent)
    if isinstance(agent, AgentSpec):
        return agent
    raise TypeError(
        f"run an Agent or an AgentSpec, not {type(agent).__name__} "
        "(a JSON spec: AgentSpec.model_validate(data))"
    )


@overload
def _typed(agent: Agent[OutputT], run_id: str, result: AgentResult) -> RunResult[OutputT]: ...
@overload
def _typed(agent: AgentSpec, run_id: str, result: AgentResult) -> RunResult[Any]: ...
def _typed(agent: Agent[Any] | AgentSpec, run_id: str, result: AgentResult) -> RunResult[Any]:
    """The run's answer as ``agent`` types it; ``AgentRunError`` when it has none."""
    if isinstance(agent, Agent):
        return agent.output_of(run_id, result)
    if result.status != "done" or result.final is None:
        raise AgentRunError(run_id, result)
    output = result.structured_output if agent.output_schema else result.final.content
    return RunResult(session_id=run_id, output=output, result=result)
