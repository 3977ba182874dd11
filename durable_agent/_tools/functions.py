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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, get_type_hints, overload

from pydantic import BaseModel, TypeAdapter, ValidationError, create_model

from durable_agent._spec.tools import (
    ApprovalMode,
    ApprovalPredicate,
    CallDescriber,
    EffectCheck,
    EscalationNotifier,
    ExecutionMode,
    NamedPredicate,
    ToolArgumentsError,
    ToolContext,
    ToolPolicy,
)
from durable_agent._wire.messages import ApprovalDecision, ToolDefinition


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
    null_means_default: frozenset[str] = frozenset()
    """Parameters with a default whose type takes no ``None``."""

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
        # strict mode makes every field required, an optional one nullable: a null for a
        # parameter whose type takes none means "use its default"
        for name in self.null_means_default & merged.keys():
            if merged[name] is None:
                del merged[name]
        try:
            return self.arguments_model.model_validate(merged).model_dump()
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in error.errors()
            )
            raise ToolArgumentsError(f"Invalid arguments for '{self.name}': {problems}") from error

    async def invoke(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        """Call the function with ``arguments`` (validated, secrets filled in) as its
        parameters are typed: a parameter declared as a pydantic model or a dataclass
        gets one, not the dict it travelled as."""
        kwargs = dict(arguments)
        if self.arguments_model is not None:
            typed = self.arguments_model.model_validate(kwargs)
            kwargs = {name: getattr(typed, name) for name in type(typed).model_fields}
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


def _null_means_default(model: type[BaseModel]) -> frozenset[str]:
    names = set()
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        try:
            TypeAdapter(info.annotation or Any).validate_python(None)
        except ValidationError:
            names.add(name)
    return frozenset(names)


def _description(fn: Callable[..., Any]) -> str:
    return inspect.getdoc(fn) or ""


def _build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    strict: bool,
    bind: dict[str, str] | None,
    approval: ApprovalMode | ApprovalPredicate | None,
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
    approvers = policy_fields.get("approvers")
    if approval == "never" and approvers:
        raise TypeError(
            f"tool {name or fn.__name__}: approvers= names who decides its calls, but "
            "approval='never' asks no one; leave approval= out (approvers alone gates "
            "every call) or drop approvers="
        )
    if approval is None:  # naming approvers gates every call
        approval = "always" if approvers else "never"
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
        null_means_default=_null_means_default(model),
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalMode | ApprovalPredicate | None = None,
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
    external_output: bool = False,
    registry: Registers | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    approval: ApprovalMode | ApprovalPredicate | None = None,
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
    external_output: bool = False,
    registry: Registers | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool of a typed function (and add it to ``registry``, when one is given).
    Usable bare (``@tool``) or with options. A worker runs the tools its ``Registry``
    holds.

    ``check``: for a tool whose effect may have happened before its worker died, a
    function of the :class:`ToolContext` that returns the call's result when the effect
    exists (looked up by ``idempotency_key``) and ``None`` when it does not. It runs
    before a call is started again after a lost worker, and its answer is used instead
    of running the tool twice.

    ``describe``: a function of the validated arguments that says in a few words what a
    call waiting for approval would do (``described_arguments``); ``approvers``: who
    may decide its calls. Naming approvers gates every call (``approval="always"``
    unless ``approval`` says otherwise); ``approval="never"`` with approvers is refused.

    ``external_output``: the calls' output comes from outside (a page the person is
    on, another system): the function is never run, its signature and docstring only
    describe the tool to the model; each call waits until someone who may decide the
    session's calls commits its output (``SessionHandle.commit_tool_output``) or denies
    it, or its deadline (``approval_timeout_seconds``) denies it."""

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
                "external_output": external_output or None,
            },
        )
        if registry is not None:
            registry.add(built)
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


@dataclass(frozen=True)
class NamedHook:
    """An approval predicate or escalation notifier, by the name a spec gives it."""

    name: str
    fn: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class Registers(Protocol):
    """Where a decorator given ``registry=`` puts what it makes (a ``Registry``)."""

    def add(self, item: Any) -> None: ...


def approval_predicate(
    fn: NamedPredicate | None = None,
    /,
    *,
    name: str | None = None,
    registry: Registers | None = None,
) -> Any:
    """A predicate that spec rules name (``approvals.rules[].predicate``): a function of
    the tool's name and the call's arguments that says whether the rule applies. Usable
    bare or with options; a worker has the ones its ``Registry`` holds."""

    return _registered_hook(fn, name, registry)


def escalation_notifier(
    fn: EscalationNotifier | None = None,
    /,
    *,
    name: str | None = None,
    registry: Registers | None = None,
) -> Any:
    """A function that tells a second group about calls waiting for them
    (``approvals.escalation.notifier``); it gets an ``EscalationNotice``. A worker has the
    ones its ``Registry`` holds."""
    return _registered_hook(fn, name, registry)


def _registered_hook(
    fn: Callable[..., Any] | None, name: str | None, registry: Registers | None
) -> Any:
    """``fn`` (or, used with options, the function decorated) as a named hook."""

    def wrap(f: Callable[..., Any]) -> NamedHook:
        hook = NamedHook(name or f.__name__, f)
        if registry is not None:
            registry.add(hook)
        return hook

    return wrap(fn) if fn is not None else wrap
