"""Tools: plain typed Python functions, described to the model and run as activities.

``@tool`` turns a function (sync or async) into a :class:`Tool`: its name, the
description from its docstring, a JSON schema from its signature (via
pydantic), and a policy (approval, execution mode, timeout, retries, task
queue). Parameters typed :class:`ToolContext`, and those named in ``bind``, are
injected at call time and hidden from the model.

A tool's attempts count only its own failures (it raised, or overran its
``timeout_seconds``). A worker that dies mid-call is infrastructure: the call runs
again on another worker with the same idempotency key, as often as it takes, and
an effect ``check`` (when the tool declares one) runs first to say whether the
effect already happened.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, get_type_hints, overload

from pydantic import BaseModel, ValidationError, create_model

from durable_agent.core import (
    ApprovalDecision,
    ApprovalMode,
    ApprovalPredicate,
    CallDescriber,
    EffectCheck,
    EscalationNotifier,
    ExecutionMode,
    NamedPredicate,
    ToolArgumentsError,
    ToolContext,
    ToolDefinition,
    ToolPolicy,
)


@dataclass(frozen=True)
class Tool:
    definition: ToolDefinition
    policy: ToolPolicy
    handler: Callable[..., Any]
    arguments_model: type[BaseModel] | None
    """Validates the model's arguments; ``None`` for tools defined by a raw schema."""
    context_parameter: str | None = None
    bind: dict[str, str] = field(default_factory=dict)
    """Parameter -> key of the session's ``context`` to fill it from."""
    predicate: ApprovalPredicate | None = None
    describe: CallDescriber | None = None
    check: EffectCheck | None = None
    """Asked before re-running a call whose worker was lost (see :data:`EffectCheck`)."""

    @property
    def name(self) -> str:
        return self.definition.name

    def validate_arguments(self, arguments: str, bound: dict[str, Any]) -> dict[str, Any]:
        """Parse and validate the raw JSON arguments, with bound values merged in."""
        try:
            raw = json.loads(arguments) if arguments.strip() else {}
        except ValueError as error:
            raise ToolArgumentsError(
                f"Invalid arguments for '{self.name}': not valid JSON ({error}). "
                f"Arguments received: {arguments[:500]}"
            ) from error
        if not isinstance(raw, dict):
            raise ToolArgumentsError(
                f"Invalid arguments for '{self.name}': expected a JSON object, "
                f"got {arguments[:200]}"
            )
        merged = {**raw, **bound}  # bound values win over anything the model sent
        if self.arguments_model is None:
            return merged
        try:
            return self.arguments_model.model_validate(merged).model_dump()
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in error.errors()
            )
            raise ToolArgumentsError(f"Invalid arguments for '{self.name}': {problems}") from error

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        kwargs = dict(arguments)
        if self.context_parameter:
            kwargs[self.context_parameter] = context
        if self.arguments_model is None:
            call = functools.partial(self.handler, kwargs, context)
        else:
            call = functools.partial(self.handler, **kwargs)
        if inspect.iscoroutinefunction(self.handler):
            return await call()
        result = await asyncio.to_thread(call)  # a sync tool must not block the worker's loop
        return await result if inspect.isawaitable(result) else result

    async def effect_done(self, context: ToolContext) -> Any:
        """The recorded result of an effect that already happened, or ``None`` (also when
        the tool declares no check)."""
        if self.check is None:
            return None
        if inspect.iscoroutinefunction(self.check):
            return await self.check(context)
        found = await asyncio.to_thread(self.check, context)
        return await found if inspect.isawaitable(found) else found


def _description(fn: Callable[..., Any]) -> str:
    return inspect.getdoc(fn) or ""


def _build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    strict: bool,
    bind: dict[str, str] | None,
    approval: ApprovalMode | ApprovalPredicate,
    check: EffectCheck | None,
    policy_fields: dict[str, Any],
    describe: CallDescriber | None = None,
) -> Tool:
    hints = get_type_hints(fn)
    signature = inspect.signature(fn)
    fields: dict[str, Any] = {}
    context_parameter = None
    bind = dict(bind or {})
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"tool {fn.__name__}: *args and **kwargs cannot be described")
        annotation = hints.get(parameter.name, Any)
        if annotation is ToolContext:
            context_parameter = parameter.name
            continue
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    unknown = set(bind) - set(fields)
    if unknown:
        raise TypeError(f"tool {fn.__name__}: bind names unknown parameters {sorted(unknown)}")
    model = create_model(f"{fn.__name__}_arguments", **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    predicate = None
    if callable(approval):
        predicate, approval = approval, "predicate"
    definition = ToolDefinition(
        name=name or fn.__name__,
        description=description if description is not None else _description(fn),
        parameters=schema,
        strict=strict,
        bound_parameters=tuple(bind),
    )
    return Tool(
        definition=definition,
        policy=ToolPolicy(approval=approval, **policy_fields),
        handler=fn,
        arguments_model=model,
        context_parameter=context_parameter,
        bind=bind,
        predicate=predicate,
        describe=describe,
        check=check,
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalMode | ApprovalPredicate = "never",
    execution_mode: ExecutionMode = "parallel",
    timeout_seconds: float = 300.0,
    max_attempts: int = 3,
    initial_retry_seconds: float = 1.0,
    task_queue: str | None = None,
    strict: bool = False,
    bind: dict[str, str] | None = None,
    approval_timeout_seconds: float | None = None,
    approval_timeout_decision: ApprovalDecision = "denied",
    max_result_chars: int = 100_000,
    check: EffectCheck | None = None,
    describe: CallDescriber | None = None,
    approvers: list[str] | None = None,
    registry: ToolRegistry | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalMode | ApprovalPredicate = "never",
    execution_mode: ExecutionMode = "parallel",
    timeout_seconds: float = 300.0,
    max_attempts: int = 3,
    initial_retry_seconds: float = 1.0,
    task_queue: str | None = None,
    strict: bool = False,
    bind: dict[str, str] | None = None,
    approval_timeout_seconds: float | None = None,
    approval_timeout_decision: ApprovalDecision = "denied",
    max_result_chars: int = 100_000,
    check: EffectCheck | None = None,
    describe: CallDescriber | None = None,
    approvers: list[str] | None = None,
    registry: ToolRegistry | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a typed function and register it (in ``default_registry`` unless
    another ``registry`` is given). Usable bare (``@tool``) or with options.

    ``check``: for a tool whose effect may have happened before its worker died, a
    function of the :class:`ToolContext` that returns the call's result when the effect
    exists (looked up by ``idempotency_key``) and ``None`` when it does not. It runs
    before a call is started again after a lost worker, and its answer is used instead
    of running the tool twice.

    ``describe``: a function of the validated arguments that says in a few words what a
    call waiting for approval would do (``described_arguments``); ``approvers``: who
    may decide its calls."""

    def wrap(f: Callable[..., Any]) -> Tool:
        built = _build_tool(
            f,
            name=name,
            description=description,
            strict=strict,
            bind=bind,
            approval=approval,
            check=check,
            describe=describe,
            policy_fields={
                "execution_mode": execution_mode,
                "timeout_seconds": timeout_seconds,
                "max_attempts": max_attempts,
                "initial_retry_seconds": initial_retry_seconds,
                "task_queue": task_queue,
                "approval_timeout_seconds": approval_timeout_seconds,
                "approval_timeout_decision": approval_timeout_decision,
                "max_result_chars": max_result_chars,
                "approvers": approvers,
            },
        )
        (default_registry if registry is None else registry).add(built)
        return built

    return wrap(fn) if fn is not None else wrap


def schema_tool(
    definition: ToolDefinition,
    handler: Callable[[dict[str, Any], ToolContext], Any | Awaitable[Any]],
    *,
    policy: ToolPolicy | None = None,
    bind: dict[str, str] | None = None,
    check: EffectCheck | None = None,
) -> Tool:
    """A tool described by a raw JSON schema (generated or proxied tools); the handler
    receives the parsed arguments and the :class:`ToolContext`."""
    bind = dict(bind or {})
    if bind and set(bind) != set(definition.bound_parameters):
        definition = definition.model_copy(update={"bound_parameters": tuple(bind)})
    return Tool(
        definition=definition,
        policy=policy or ToolPolicy(),
        handler=handler,
        arguments_model=None,
        bind=bind,
        check=check,
    )


class RegisteredGuardrail(Protocol):
    """What the registry keeps of a guardrail (``durable_agent.tools._guardrails.Guardrail``)."""

    @property
    def name(self) -> str: ...

    @property
    def check(self) -> Callable[[str], Any]: ...

    async def verdict(self, text: str) -> str | None: ...


class ToolRegistry:
    """The tools (and guardrails) a worker can run, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._guardrails: dict[str, RegisteredGuardrail] = {}
        self._hooks: dict[str, Callable[..., Any]] = {}
        self._round_hooks: dict[str, Any] = {}
        for t in tools:
            self.add(t)

    def add_hook(self, name: str, fn: Callable[..., Any]) -> None:
        """An approval predicate or escalation notifier a spec may name."""
        existing = self._hooks.get(name)
        if existing is not None and existing is not fn:
            raise ValueError(f"a different approval hook named {name!r} is already registered")
        self._hooks[name] = fn

    def hook(self, name: str) -> Callable[..., Any] | None:
        return self._hooks.get(name)

    def add_round_hook(self, hook: Any) -> None:
        """A hook over each model call (``durable_agent.tools._round_hooks.RoundHook``)."""
        existing = self._round_hooks.get(hook.name)
        if existing is not None and existing.fn is not hook.fn:
            raise ValueError(f"a different hook named {hook.name!r} is already registered")
        self._round_hooks[hook.name] = hook

    def round_hook(self, name: str) -> Any:
        return self._round_hooks.get(name)

    def add_guardrail(self, g: RegisteredGuardrail) -> None:
        existing = self._guardrails.get(g.name)
        if existing is not None and existing.check is not g.check:
            raise ValueError(f"a different guardrail named {g.name!r} is already registered")
        self._guardrails[g.name] = g

    def guardrail(self, name: str) -> RegisteredGuardrail | None:
        return self._guardrails.get(name)

    def add(self, t: Tool) -> None:
        existing = self._tools.get(t.name)
        if existing is not None and existing.handler is not t.handler:
            raise ValueError(f"a different tool named {t.name!r} is already registered")
        self._tools[t.name] = t

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


default_registry = ToolRegistry()


def approval_predicate(
    fn: NamedPredicate | None = None,
    /,
    *,
    name: str | None = None,
    registry: ToolRegistry | None = None,
) -> Any:
    """Register a predicate that spec rules name (``approvals.rules[].predicate``): a
    function of the tool's name and the call's arguments that says whether the rule
    applies. Usable bare or with options."""

    return _registered_hook(fn, name, registry)


def escalation_notifier(
    fn: EscalationNotifier | None = None,
    /,
    *,
    name: str | None = None,
    registry: ToolRegistry | None = None,
) -> Any:
    """Register a function that tells a second group about calls waiting for them
    (``approvals.escalation.notifier``); it gets an ``EscalationNotice``."""
    return _registered_hook(fn, name, registry)


def _registered_hook(
    fn: Callable[..., Any] | None, name: str | None, registry: ToolRegistry | None
) -> Any:
    """Register ``fn`` (or, used with options, the function decorated) as a hook."""

    def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
        (default_registry if registry is None else registry).add_hook(name or f.__name__, f)
        return f

    return wrap(fn) if fn is not None else wrap
