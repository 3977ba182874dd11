"""Carrying out ``RunTools``: each group in turn, its calls as activities in bounded
waves, each call to its final result.

A call's result is final when the tool returned, or raised (or overran its time) on
its last attempt, or lost workers for longer than the session allows. Between the
tool's own failures the call waits on a durable timer; lost workers are Temporal's
to retry and never count.

Also which agent run a call belongs to when a workflow runs several agents inline
(``run_scope``), so each run's calls get idempotency keys of their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import timedelta
from typing import Protocol

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.boundary import (
        TOOL_TIMEOUT_GRACE_SECONDS,
        WORKFLOW_NAME,
        AgentResult,
        GuardrailInput,
        GuardrailVerdict,
        ListRemoteToolsInput,
        ResolvedTool,
        ResolveToolsInput,
        ResolveToolsResult,
        ToolCallInput,
        ToolReturn,
        ToolRoutes,
        ToolRoutesInput,
    )
    from durable_agent._errors import Failure
    from durable_agent._session import (
        CheckGuardrails,
        RunTools,
        Session,
        ToolRun,
        backoff,
        call_summary,
        tool_error_result,
        tool_retry_delay,
    )
    from durable_agent._session.protocol import ChildStarted, ForwardsTaken, ToolArrived
    from durable_agent._spec.document import AgentInput, AgentSpec, SessionRules
    from durable_agent._spec.tool_kinds import Refused, SubAgentCall, child_message
    from durable_agent._wire.messages import ToolMessage
    from durable_agent._wire.transcript import Transcript

    from .checks import start_check
    from .retries import LOST_WORK_RETRIES, gave_up_text, give_up_after


# Which agent run inside someone else's workflow a call belongs to.
#
# A session workflow is one session: its id names it, and its calls' idempotency keys
# and sub-agents' ids are made from it. A workflow may run several agents inline, one
# after another or side by side, each from turn 1: their calls need a name of their own
# under the workflow's id, or the second run's calls would take the first's keys.

_SCOPE: ContextVar[str | None] = ContextVar("durable_agent_run_scope", default=None)


@contextmanager
def run_scope(scope: str) -> Iterator[None]:
    """Within the block (its tasks too), calls belong to the inline run ``scope``."""
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def current_run() -> str | None:
    """The inline run the calling code belongs to (``None``: the session workflow)."""
    return _SCOPE.get()


async def resolve_tools(
    names: list[str], guardrails: list[str], hooks: list[str], rules: SessionRules
) -> ResolveToolsResult:
    """The named tools as the workers describe them, and which guardrails they lack (once,
    at the session's start)."""
    return await start_check(
        "resolve_tools",
        ResolveToolsInput(names=names, guardrails=guardrails, hooks=hooks),
        ResolveToolsResult,
        timeout=timedelta(seconds=30),
        summary=f"resolve_tools {', '.join(names)}",
    )


async def list_remote_tools(spec: AgentSpec) -> list[ResolvedTool]:
    """The tools of the spec's toolsets (MCP servers, OpenAPI services, sources of other
    kinds), as they are when the session starts; one that cannot be reached or used
    fails the session by name."""
    try:
        tools: list[ResolvedTool] = await workflow.execute_activity(
            "list_remote_tools",
            ListRemoteToolsInput(toolsets=spec.toolsets),
            result_type=list[ResolvedTool],
            start_to_close_timeout=timedelta(
                seconds=30 + sum(t.listing_seconds for t in spec.toolsets)
            ),
            heartbeat_timeout=timedelta(seconds=spec.session.heartbeat_timeout_seconds),
            retry_policy=LOST_WORK_RETRIES,
            summary="list_remote_tools " + ", ".join(t.name for t in spec.toolsets),
        )
    except ActivityError as error:
        cause = error.cause
        unusable = (
            Failure.MCP_SERVER_UNAVAILABLE,
            Failure.OPENAPI_UNUSABLE,
            Failure.TOOLSET_UNAVAILABLE,
        )
        if isinstance(cause, ApplicationError) and cause.type in unusable:
            raise ApplicationError(cause.message, type=cause.type, non_retryable=True) from None
        raise
    return tools


async def check_guardrails(
    command: CheckGuardrails, spec: AgentSpec
) -> tuple[GuardrailVerdict | None, str | None]:
    """The guardrails' verdict, or why there is none: a guardrail that raised is tried
    again on durable timers, ``guardrails.max_attempts`` times in all."""
    rules, attempt = spec.guardrails, 1
    while True:
        try:
            verdict: GuardrailVerdict = await workflow.execute_activity(
                "check_guardrails",
                GuardrailInput(kind=command.kind, names=command.names, text=command.text),
                result_type=GuardrailVerdict,
                start_to_close_timeout=timedelta(seconds=rules.timeout_seconds),
                heartbeat_timeout=timedelta(seconds=spec.session.heartbeat_timeout_seconds),
                retry_policy=LOST_WORK_RETRIES,
                summary=f"check_guardrails {command.kind} {', '.join(command.names)}",
            )
            return verdict, None
        except ActivityError as error:
            cause = error.cause
            failed = isinstance(cause, ApplicationError) and cause.type == Failure.GUARDRAIL_FAILED
            if failed and attempt < rules.max_attempts:
                await workflow.sleep(backoff(1.0, 30.0, attempt))
                attempt += 1
                continue
            detail = cause.message if isinstance(cause, ApplicationError) else str(cause or error)
            return None, f"the guardrail failed: {detail}"


class ToolWatcher(Protocol):
    """Told when each call starts and gets its result (the live event log)."""

    def tool_started(self, turn: int, run: ToolRun) -> None: ...

    def tool_finished(self, turn: int, run: ToolRun, result: ToolMessage) -> None: ...


async def run_tool_groups(
    command: RunTools,
    session: Session,
    watcher: ToolWatcher | None = None,
    returned: Callable[[int], None] = lambda slot: None,
) -> None:
    """Run the command's groups, one after another. Each call's result is placed in the
    Session's batch as it arrives (``Session.tool_arrived``, encoded for the array it
    will join in the task it arrives in, not all at once in the task that appends them),
    then told to ``watcher``; ``returned`` is told each slot whose result is exactly what
    its activity returned (and stored), so the next model call can refer to it. Once the
    turn is cancelled, running calls are cancelled through Temporal and later groups do
    not start: those slots are left for the Session to fill. In the array's version-2 hash chain
    each activity works out its result's digest and size, so no result is encoded here.
    Calls recorded to go to another task queue are sent only where the session's worker
    routes tool calls now (asked once per batch), whatever the record says: the others'
    results say why not."""
    refused = await _refused_routes(command)
    rules, messages = session.spec.session, session.messages
    digests = messages if messages.takes_digests else None
    places = asyncio.Semaphore(command.max_concurrent)

    def cancelled() -> bool:
        return session.view.loop.cancelling

    async def run_in_place(run: ToolRun) -> None:
        async with places:  # a batch of any size runs in bounded waves
            if watcher is not None:
                watcher.tool_started(command.turn, run)
            result_id = session.view.result_id(run.slot)
            if run.runs_in == "child_session":
                result, unchanged = await run_sub_agent(command.turn, run, session)
            else:
                result, unchanged = await run_tool(
                    command.turn, run, rules, digests, refused, result_id
                )
            if result_id is not None and result.id != result_id:  # made here, or elsewhere
                result, unchanged = result.model_copy(update={"id": result_id}), False
            messages.encode_ahead(result)  # (nothing, if its digest came with it)
            session.handle(ToolArrived(run.slot, result), workflow.now())
            if watcher is not None:
                watcher.tool_finished(command.turn, run, result)
            if unchanged:
                returned(run.slot)

    for group in command.groups:
        if cancelled():
            break
        await _in_runners(group, run_in_place, command.max_concurrent, cancelled)


async def run_sub_agent(turn: int, run: ToolRun, session: Session) -> tuple[ToolMessage, bool]:
    """A sub-agent call: a child session, its id derived from the parent's call slot, its
    final answer the result and its usage the parent's too. Decisions on its approvals
    made through the parent are passed on. Cancelling the turn cancels it; so does
    ending the session (and closing the parent terminates it)."""
    call = run.call
    assert isinstance(run.target, SubAgentCall)
    agent = run.target.spec
    task = child_message(call.function.arguments, run.target.inputs)
    if task is None or isinstance(task, Refused):
        failed = tool_error_result(call, task or "give the agent a non-empty 'task' string")
        return failed.model_copy(update={"approval": run.approval}), False
    one_shot = agent.session.model_copy(update={"end_after_reply": True})
    info = workflow.info()
    scope = current_run()
    within = f"{info.workflow_id}--{scope}" if scope is not None else info.workflow_id
    # bound to this run: no one can take it first
    run_bound = info.first_execution_run_id[:8]
    child_id = f"{within}--{call.function.name}-t{turn}c{run.slot}-{run_bound}"
    # the child is its parent's owner's: its model calls count under the same tenant
    owner = workflow.memo_value("owner", "", type_hint=str)
    try:
        handle = await workflow.start_child_workflow(
            WORKFLOW_NAME,
            AgentInput(spec=agent.model_copy(update={"session": one_shot}), message=task),
            id=child_id,
            result_type=AgentResult,
            static_summary=f"sub-agent {call.function.name}",
            memo={"owner": owner} if owner else None,
        )
    except WorkflowAlreadyStartedError:  # someone took the id first: the call fails, not us
        taken = tool_error_result(call, f"the agent could not start: {child_id} is taken")
        return taken.model_copy(update={"approval": run.approval}), False
    session.handle(ChildStarted(child_id), workflow.now())

    def over_or_forwards() -> bool:
        return (
            handle.done()
            or session.view.loop.ending
            or bool(session.view.approvals.forwards(child_id))
        )

    try:
        while True:
            await workflow.wait_condition(over_or_forwards)
            if handle.done() or session.view.loop.ending:
                break
            forwards = session.view.approvals.forwards(child_id)
            session.handle(ForwardsTaken(child_id), workflow.now())
            for verb, decision in forwards:
                await handle.signal(verb, decision)
    except asyncio.CancelledError:  # the turn was cancelled: so is the child
        handle.cancel()
        raise
    if not handle.done():
        handle.cancel()
        raise asyncio.CancelledError  # the Session fills the slot, saying why
    now = int(workflow.now().timestamp() * 1000)
    try:
        result: AgentResult = await handle
    except ChildWorkflowError as error:
        cause = error.cause
        if isinstance(cause, CancelledError):
            raise asyncio.CancelledError from None
        detail = cause.message if isinstance(cause, ApplicationError) else str(cause or error)
        failed = tool_error_result(call, f"the agent failed: {detail}")
        return failed.model_copy(update={"approval": run.approval, "timestamp": now}), False
    answer = result.final.content if result.final is not None else ""
    message = ToolMessage(
        tool_call_id=call.id,
        content=answer if result.status == "done" else f"the agent stopped: {result.error}",
        tool_name=call.function.name,
        is_error=None if result.status == "done" else True,
        approval=run.approval,
        timestamp=now,
        usage=result.usage,
    )
    return message, False


async def _in_runners(
    group: Sequence[ToolRun],
    run_one: Callable[[ToolRun], Awaitable[None]],
    most: int,
    cancelled: Callable[[], bool],
) -> None:
    """The group's calls, at most ``most`` at a time: each runner takes the next call in
    request order when its own is done. Once ``cancelled()``, the running calls are
    cancelled and the rest never start."""
    taken = 0  # the calls taken so far, in request order (each made as it is taken)

    async def runner() -> None:
        nonlocal taken
        while taken < len(group):
            run = group[taken]
            taken += 1
            try:
                await run_one(run)
            except ActivityError:
                continue  # cancelled mid-call: the slot is the Session's to fill
            except asyncio.CancelledError:
                return

    runners = [asyncio.ensure_future(runner()) for _ in range(min(most, len(group)))]
    await workflow.wait_condition(lambda: all(r.done() for r in runners) or cancelled())
    taken = len(group)  # the rest never start
    for each in runners:
        each.cancel()  # no-op for the finished ones
    for outcome in await asyncio.gather(*runners, return_exceptions=True):
        if isinstance(outcome, Exception):  # not a cancellation: the session's to see
            raise outcome


async def _refused_routes(command: RunTools) -> Mapping[str, str]:
    """The task queues among the batch's calls that the session's worker does not route
    to now, and why (a local activity: the worker's registries, recorded)."""
    routed = {run.tool.policy.task_queue for group in command.groups for run in group}
    queues = sorted(q for q in routed if q is not None)
    if not queues:
        return {}
    routes: ToolRoutes = await workflow.execute_local_activity(
        "check_tool_routes",
        ToolRoutesInput(queues=queues),
        result_type=ToolRoutes,
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=LOST_WORK_RETRIES,
        summary="check_tool_routes",
    )
    return routes.refused


async def run_tool(
    turn: int,
    run: ToolRun,
    rules: SessionRules,
    digests: Transcript | None = None,
    refused: Mapping[str, str] | None = None,
    result_id: str | None = None,
) -> tuple[ToolMessage, bool]:
    """The slot's result, and whether it is exactly what the activity returned (then
    ``digests``, when given, is told the digest and size the activity worked out). A
    call recorded for a task queue in ``refused`` is not sent: its result says why.
    ``result_id``: the stable id the result takes, told to a worker of the session's
    own task queue (another queue's may be of a build that does not know it)."""
    call, policy = run.call, run.tool.policy
    why = (refused or {}).get(policy.task_queue or "")
    if why is not None:
        failed = tool_error_result(call, f"Not allowed on this worker: {why}")
        return failed.model_copy(update={"approval": run.approval}), False
    if policy.task_queue is not None:
        digests = result_id = None  # its workers may be of another build, which would not know to
    limit = policy.timeout_seconds + TOOL_TIMEOUT_GRACE_SECONDS
    attempt = 1
    while True:
        try:
            returned: ToolMessage | ToolReturn = await workflow.execute_activity(
                "run_tool",
                ToolCallInput(
                    turn=turn,
                    slot=run.slot,
                    tool_name=call.function.name,
                    tool_call_id=call.id,
                    arguments=call.function.arguments,
                    bound=run.bound,
                    approval=run.approval,
                    max_result_chars=policy.max_result_chars,
                    attempt=attempt,
                    secrets=run.secrets,
                    target=run.target,
                    agent_name=run.agent_name,
                    digested=digests is not None or None,
                    run=current_run(),
                    message_id=result_id,
                ),
                result_type=ToolMessage if digests is None else ToolReturn,
                task_queue=policy.task_queue,
                # the activity enforces the tool's own limit; past this, the worker is stuck
                start_to_close_timeout=timedelta(seconds=limit),
                heartbeat_timeout=timedelta(seconds=rules.heartbeat_timeout_seconds),
                schedule_to_close_timeout=give_up_after(limit, rules.recovery_limit_seconds),
                retry_policy=LOST_WORK_RETRIES,
                summary=call_summary(call),
            )
            break
        except ActivityError as error:
            cause = error.cause
            if isinstance(cause, CancelledError):
                raise  # the turn was cancelled: the Session fills the slot
            raised = isinstance(cause, ApplicationError) and cause.type == Failure.TOOL_RAISED
            delay = tool_retry_delay(policy, attempt) if raised else None
            if delay is not None:
                # the tool's own failure: one of its attempts, then a durable wait
                await workflow.sleep(delay)
                attempt += 1
                continue
            if isinstance(cause, ApplicationError):
                typed = cause.type and not raised  # ToolRaised messages name the type
                detail = f"{cause.type}: {cause.message}" if typed else cause.message
            elif isinstance(cause, ActivityTimeout):
                detail = gave_up_text("the call", rules.recovery_limit_seconds)
            else:
                detail = str(cause or error)
            failed = tool_error_result(call, detail)
            return failed.model_copy(update={"approval": run.approval}), False
    result = returned.message if isinstance(returned, ToolReturn) else returned
    if result.tool_call_id == call.id and result.approval == run.approval:
        if digests is not None and isinstance(returned, ToolReturn):
            digests.encode_ahead(result, returned.digest, returned.size)
        return result, True
    # pair by position: the slot's id is the call's, whatever the activity echoed
    fixed = {"tool_call_id": call.id, "approval": run.approval, "agent_name": run.agent_name}
    return result.model_copy(update=fixed), False
