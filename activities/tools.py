"""Tool activities: resolve definitions at session start, execute; and the guardrails,
which workers load beside the tools (the gate's are in ``activities/approvals.py``).

``run_tool`` keeps two kinds of failure apart. The tool's own (it raised, or overran
its time) is reported as a non-retryable ``ToolRaised`` error, and the workflow spends
one of the tool's attempts on it. A lost worker is Temporal's to notice (the
activity heartbeats on a timer) and to retry, without limit and with backoff; on
such a retry the tool's effect check, if it has one, runs before the tool does.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Protocol

import structlog
from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from durable_agent._contracts.boundary import (
    TOOL_TIMEOUT_GRACE_SECONDS,
    GuardrailInput,
    GuardrailVerdict,
    ListRemoteToolsInput,
    ResolvedTool,
    ResolveToolsInput,
    ResolveToolsResult,
    ToolCallInput,
    ToolReturn,
    digested,
)
from durable_agent._errors import Failure
from durable_agent._observability.tracing import (
    record_failure,
    record_tool_result,
    tool_span,
)
from durable_agent._spec.secret_values import (
    SecretError,
    SecretProvider,
    SecretResolver,
    environment_secrets,
)
from durable_agent._spec.tool_kinds import (
    CallTarget,
    ToolKind,
    ToolsetError,
    UnknownToolKind,
    WorkerSide,
)
from durable_agent._spec.tools import OwnerGates, ToolArgumentsError, ToolContext
from durable_agent._tools.mcp_servers import McpServerError, error_reason
from durable_agent._tools.openapi import OpenApiError
from durable_agent._tools.registry import Registry, run_guardrails
from durable_agent._wire.messages import Message, ToolMessage, explain
from durable_agent.capabilities import Capabilities
from durable_agent.extending import NotAllowed, NotRegistered

from .running import count_tool_call, heartbeating, heartbeats

log = structlog.get_logger("durable_agent._tools")


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    return json.dumps(result, ensure_ascii=False, default=str)


def _own_time_limit(start_to_close: timedelta | None) -> float | None:
    """The tool's own limit: the activity's start-to-close less the grace the workflow
    added (so a start-to-close timeout means a wedged worker, not a slow tool)."""
    if start_to_close is None:
        return None
    return max(start_to_close.total_seconds() - TOOL_TIMEOUT_GRACE_SECONDS, 0.1)


class ResultKeeper(Protocol):
    """Where a tool result is kept under its content hash, so the next model call can
    refer to it instead of carrying it into history a second time (the workers'
    transcript store is one)."""

    async def put_message(self, message: Message) -> str: ...

    def kept_json(self, message: Message) -> str | None:
        """The canonical JSON ``message`` was kept as (``None``: not kept here)."""


class _KeepNothing:
    async def put_message(self, message: Message) -> str:
        raise RuntimeError("no store: the next model call carries this result itself")

    def kept_json(self, message: Message) -> str | None:
        return None


class ToolActivities:
    def __init__(
        self,
        registry: Registry | None = None,
        results: ResultKeeper | None = None,
        secrets: SecretProvider | None = None,
        capabilities: Capabilities | None = None,
    ) -> None:
        self._registry = registry if registry is not None else Registry()
        self._results: ResultKeeper = results or _KeepNothing()
        self._secrets = secrets or environment_secrets
        self._capabilities = capabilities or Capabilities()
        self._worker = WorkerSide(self._capabilities)

    @activity.defn(name="resolve_tools")
    @heartbeats
    async def resolve_tools(self, request: ResolveToolsInput) -> ResolveToolsResult:
        resolved, missing = [], []
        lacking = [g for g in request.guardrails if self._registry.guardrail(g) is None]
        for name in request.names:
            found = self._registry.get(name)
            if found is None:
                missing.append(name)
                continue
            resolved.append(
                ResolvedTool(
                    definition=found.definition,
                    policy=found.policy,
                    bind=found.bind,
                    describes=found.describe is not None,
                    floor=OwnerGates.of(found.policy),
                )
            )
        registry = self._registry
        hooks = [
            h for h in request.hooks if registry.hook(h) is None and not registry.round_hook(h)
        ]
        return ResolveToolsResult(
            tools=resolved,
            missing=missing,
            available=registry.names() if missing else [],
            missing_guardrails=lacking,
            missing_hooks=hooks,
        )

    @activity.defn(name="list_remote_tools")
    @heartbeats
    async def list_remote_tools(self, request: ListRemoteToolsInput) -> list[ResolvedTool]:
        """The tools of the spec's toolsets (once, at the session's start), each listed
        by its kind. One that cannot be reached or used fails the session at once, by
        name."""
        tools: list[ResolvedTool] = []
        for source in request.toolsets:
            try:
                kind = self._registry.kind(source.kind)
            except UnknownToolKind as error:
                where = f"toolset {source.name!r} ({source.kind})"
                raise ApplicationError(
                    f"{where}: {error}", type=Failure.TOOLSET_UNAVAILABLE, non_retryable=True
                ) from None
            try:
                tools += await kind.tools(source, self._worker)
            except (McpServerError, OpenApiError, ToolsetError, NotRegistered, NotAllowed) as error:
                where = kind.source_name(source)
                raise ApplicationError(
                    f"{where}: {error}", type=kind.unavailable, non_retryable=True
                ) from None
        return tools

    @activity.defn(name="check_guardrails")
    @heartbeats
    async def check_guardrails(self, request: GuardrailInput) -> GuardrailVerdict:
        """The verdict of the named guardrails; one that raises is reported as
        ``GuardrailFailed`` for the workflow to retry on a timer."""
        try:
            return await run_guardrails(self._registry, request)
        except Exception as error:
            log.warning("guardrail failed", kind=request.kind, error=str(error))
            raise ApplicationError(
                f"{type(error).__name__}: {error}",
                type=Failure.GUARDRAIL_FAILED,
                non_retryable=True,
            ) from None

    @activity.defn(name="run_tool")
    async def run_tool(self, call: ToolCallInput) -> ToolMessage | ToolReturn:
        """Run one call, in its ``execute_tool`` span (with its digest and size when the
        call asks: the workflow then need not encode it). Its heartbeats carry what the
        tool noted for a later attempt (``ToolContext.note``)."""
        noted: list[Any] = []
        async with heartbeating(lambda: noted[0] if noted else None):
            return await self._run_tool_spanned(call, noted)

    async def _run_tool_spanned(
        self, call: ToolCallInput, noted: list[Any]
    ) -> ToolMessage | ToolReturn:
        with tool_span(call.tool_name, call.tool_call_id, call.arguments) as span:
            try:
                result = await self._run_tool(call, noted)
            except ApplicationError as error:
                record_failure(span, error.type or Failure.TOOL_RAISED, error.message)
                count_tool_call(call.tool_name, error=True)
                raise
            record_tool_result(span, result)
            count_tool_call(call.tool_name, error=bool(result.is_error))
            if not call.digested:
                return result
            digest, size = digested(result, self._results.kept_json(result))
            return ToolReturn(message=result, digest=digest, size=size)

    async def _run_tool(self, call: ToolCallInput, noted: list[Any]) -> ToolMessage:
        """Run one call. Bad arguments and unknown tools come back as error results for the
        model to read; an exception in the tool, or its running out of time, is raised as
        ``ToolRaised`` for the workflow to count against the tool's attempts."""
        info = activity.info()
        session_id = info.workflow_id or ""  # the session is the workflow...
        if call.run is not None:  # ...or one of the agent runs inside it
            session_id = f"{session_id}/{call.run}"
        capabilities = self._capabilities
        identity = await self._identity(call)
        secrets = SecretResolver(
            call.secrets,
            self._secrets,
            lambda name, parameter: capabilities.secret_variable(name, identity, parameter),
        )
        unresolved: str | None = None
        try:
            bound_values = secrets.resolve_arguments(call.bound)
        except SecretError as error:
            bound_values, unresolved = {}, str(error)
        context = ToolContext(
            session_id=session_id,
            turn=call.turn,
            slot=call.slot,
            tool_call_id=call.tool_call_id,
            idempotency_key=f"{session_id}:{call.turn}:{call.slot}",
            attempt=call.attempt,
            context=bound_values,
            redelivery=info.attempt - 1,
            resumed=_resumed(info.heartbeat_details),
            _noted=noted,
            _keep=activity.heartbeat,  # at once: a worker lost a moment later keeps it
        )

        async def result(content: str, is_error: bool | None = None) -> ToolMessage:
            """The slot's final message; stored so the next model call can refer to it
            instead of carrying it into history a second time."""
            message = ToolMessage(
                id=call.message_id,
                tool_call_id=call.tool_call_id,
                content=secrets.redact(content),  # a value never leaves as itself
                tool_name=call.tool_name,
                is_error=is_error,
                approval=call.approval,
                mode="tool",
                timestamp=int(time.time() * 1000),
                usage=context.usage,
                agent_name=call.agent_name,
            )
            await self._keep(message)
            return message

        if call.target is not None:
            return await self._call_kind(call, call.target, context, secrets, result)
        found = self._registry.get(call.tool_name)
        if found is None:
            log.error("tool not loaded on this worker", tool=call.tool_name)
            return await result(
                f"Tool not registered: {call.tool_name} (the worker that ran this call has "
                "not loaded it)",
                True,
            )
        if found.policy.external_output:  # (the session never sends one: a second lock)
            log.error(
                "a call of a tool whose output comes from outside", registered_tool=call.tool_name
            )
            return await result(
                f"Not run: {call.tool_name}'s output comes from outside, and it never runs "
                "on a worker",
                True,
            )
        if unresolved is not None:
            return await result(unresolved, True)
        try:
            arguments = secrets.resolve_arguments(
                found.validate_arguments(call.arguments, call.bound)
            )
        except (ToolArgumentsError, SecretError) as error:
            return await result(str(error), True)
        bound = log.bind(
            registered_tool=call.tool_name,  # found in the registry: the owner's name
            idempotency_key=context.idempotency_key,
            attempt=call.attempt,
            redelivery=context.redelivery,
        )
        if context.redelivery and found.check is not None:
            # the worker that ran this before was lost: its effect may exist already
            done = await found.effect_done(context)
            if done is not None:
                bound.info("tool effect found by its check; not run again")
                return await result(
                    await self._fit(secrets.redact(_as_text(done)), call, context.idempotency_key)
                )
        bound.info("tool call")
        limit = _own_time_limit(info.start_to_close_timeout)
        try:
            output = await asyncio.wait_for(found.invoke(arguments, context), limit)
        except TimeoutError:
            bound.warning("tool timed out", seconds=limit)
            raise ApplicationError(
                f"ToolTimeout: did not finish within {limit:g} s",
                type=Failure.TOOL_RAISED,
                non_retryable=True,
            ) from None
        except Exception as error:
            text = secrets.redact(f"{type(error).__name__}: {error}")
            bound.warning("tool raised", error=text)
            raise ApplicationError(text, type=Failure.TOOL_RAISED, non_retryable=True) from None
        text = secrets.redact(_as_text(output))  # before anything keeps it, whole or cut
        return await result(await self._fit(text, call, context.idempotency_key))

    async def _identity(self, call: ToolCallInput) -> str | None:
        """What the call is, for the worker's secret grants: a function tool by its
        registered name; a kind's call as the kind names it from the registries (a call
        the worker refuses gets no secret, and its refusal comes with the run)."""
        if call.target is None:
            return call.tool_name
        try:
            kind, target = self._kind_of(call.target)
            return await kind.identity(target, self._worker)
        except (NotRegistered, NotAllowed):
            return None

    def _kind_of(self, target: CallTarget) -> tuple[ToolKind[Any, Any], CallTarget]:
        """The worker's kind of the call, and the call read as that kind's model; a kind
        it lacks, or a target its kind cannot read, is ``NotRegistered``."""
        try:
            return self._registry.call_of(target)
        except (UnknownToolKind, ValidationError) as error:
            raise NotRegistered(explain(error)) from None

    async def _call_kind(
        self,
        call: ToolCallInput,
        target: CallTarget,
        context: ToolContext,
        secrets: SecretResolver,
        result: Callable[..., Awaitable[ToolMessage]],
    ) -> ToolMessage:
        """A call its kind runs (MCP, OpenAPI, a registered kind): an error the kind
        reports (the server's ``isError``, a non-2xx answer) is a result the model
        reads; a service that cannot be reached is the tool's failure (retried per its
        policy)."""
        try:
            parsed = json.loads(call.arguments) if call.arguments.strip() else {}
            if not isinstance(parsed, dict):
                raise ValueError("expected a JSON object")
            arguments = secrets.resolve_arguments(parsed)
        except (ValueError, SecretError) as error:
            return await result(f"Invalid arguments for '{call.tool_name}': {error}", True)
        try:
            kind, target = self._kind_of(target)
        except NotRegistered as error:
            log.warning("tool call refused", tool=call.tool_name, error=str(error))
            return await result(f"Not allowed on this worker: {error}", True)
        where = kind.where(target)
        bound = log.bind(
            tool=call.tool_name, idempotency_key=context.idempotency_key, attempt=call.attempt
        )
        bound.info("tool call", kind=kind.name, where=where)
        limit = _own_time_limit(activity.info().start_to_close_timeout)
        try:  # the kind asks the worker at every call: the input may be anyone's
            running = kind.run(target, arguments, context, self._worker)
            text, is_error = await asyncio.wait_for(running, limit)
        except (NotRegistered, NotAllowed) as error:
            log.warning("tool call refused", tool=call.tool_name, error=str(error))
            return await result(f"Not allowed on this worker: {error}", True)
        except Exception as error:  # a timeout too: the kind's own limit, as a function's
            detail = secrets.redact(error_reason(error))
            if isinstance(error, TimeoutError):
                detail = f"ToolTimeout: did not finish within {limit:g} s"
            bound.warning("tool call failed", where=where, error=detail)
            raise ApplicationError(
                f"{where}: {detail}", type=Failure.TOOL_RAISED, non_retryable=True
            ) from None
        text = secrets.redact(text)
        return await result(await self._fit(text, call, context.idempotency_key), is_error or None)

    async def _keep(self, message: ToolMessage) -> str | None:
        """Keep a message; its key, or ``None`` when that failed (a model call then asks
        the workflow for the message instead)."""
        try:
            return await self._results.put_message(message)
        except Exception as error:
            log.warning("transcript store unavailable", error=str(error))
            return None

    async def _fit(self, text: str, call: ToolCallInput, key: str) -> str:
        """Cut a result over the tool's limit, keeping the whole in the store (named in
        the marker and the log) so nothing is silently dropped."""
        limit = call.max_result_chars
        if len(text) <= limit:
            return text
        whole = ToolMessage(tool_call_id=call.tool_call_id, content=text, tool_name=call.tool_name)
        stored = await self._keep(whole) or "unavailable"
        log.warning(
            "tool result truncated",
            tool=call.tool_name,
            idempotency_key=key,
            chars=len(text),
            kept=limit,
            stored_as=stored,
        )
        return (
            f"{text[:limit]}\n[truncated by durable-agent: showing the first {limit} of "
            f"{len(text)} characters; the whole result is stored as {stored}]"
        )


def _resumed(details: Any) -> Any:
    """What an earlier attempt of this activity noted (its last heartbeat's details)."""
    return details[0] if details else None
