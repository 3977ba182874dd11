"""Running an agent session from inside your own workflow, as a child workflow.

The child is an ordinary session: people approve its calls by signal or update on its
own id, anyone reads it by query, and its live events stream as any session's do. Your
workflow's history holds only the child's start and its ``AgentResult``, never the
conversation.

Import it in workflow code as you would any pure module::

    with workflow.unsafe.imports_passed_through():
        from ._in_workflow import run_agent

    result = await run_agent(spec, "Check order o-17 for fraud")
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent.core import WORKFLOW_NAME, AgentInput, AgentResult, AgentSpec, UserMessage


def agent_session_id(name: str) -> str:
    """The child's id: the calling workflow's id and ``name``, so a person can find the
    session (to approve its calls) from the workflow they know."""
    return f"{workflow.info().workflow_id}--{name}"


async def start_agent(
    spec: AgentSpec | dict[str, Any],
    message: str | UserMessage,
    *,
    name: str = "agent",
    one_reply: bool = True,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
) -> workflow.ChildWorkflowHandle[Any, AgentResult]:
    """Start a session as a child of the calling workflow; its handle (``.id`` is the
    session id). ``one_reply``: the session ends after its answer (otherwise it waits
    for more messages until it is ended, as any session). ``task_queue``: where the
    session's workers listen (default: the calling workflow's queue)."""
    agent = AgentSpec.model_validate(spec)
    if one_reply:
        session = agent.session.model_copy(update={"end_after_reply": True})
        agent = agent.model_copy(update={"session": session})
    return await workflow.start_child_workflow(
        WORKFLOW_NAME,
        AgentInput(spec=agent, message=message),
        id=agent_session_id(name),
        result_type=AgentResult,
        task_queue=task_queue,
        execution_timeout=execution_timeout,
        static_summary=f"agent session {name}",
    )


async def run_agent(
    spec: AgentSpec | dict[str, Any],
    message: str | UserMessage,
    *,
    name: str = "agent",
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
) -> AgentResult:
    """Run a session to its answer and return how it ended (``result.final`` is the
    answer; ``result.structured_output`` the parsed output when the spec has an
    ``output_schema``)."""
    handle = await start_agent(
        spec,
        message,
        name=name,
        task_queue=task_queue,
        execution_timeout=execution_timeout,
    )
    result: AgentResult = await handle
    return result
