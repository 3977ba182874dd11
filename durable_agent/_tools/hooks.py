"""Functions on the worker that a spec names to act on a session's traffic: hooks over
each model call, and guardrails.

A hook may rewrite what a model call sends, or the reply before it is recorded.

A ``request`` hook gets the messages one model call is about to send and returns the
ones to send instead (the array is not changed: a redaction reaches the provider, the
conversation keeps what was said). A ``reply`` hook gets the model's reply and returns
the one to record. Both run inside the model-call activity, on the worker that makes
the call, in the order the spec names them; the activity's result is the reply as the
hooks left it, so replay reads it from history and never runs a hook again.

A spec names hooks (``hooks.request`` / ``hooks.reply``); a worker that lacks one
refuses the session at its start. A hook that raises fails that model call (the turn
ends with its words, and the session goes on).

Guardrails (below) may stop a user message or a final answer.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter

from durable_agent._errors import DurableAgentError
from durable_agent._wire.messages import AssistantMessage, Message

from .functions import Registers

HookKind = Literal["request", "reply"]
_MESSAGES: TypeAdapter[list[Message]] = TypeAdapter(list[Message])


class HookContext(BaseModel):
    """What a hook knows of the call it rewrites."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    turn: int
    agent: str | None = None


class HookFailed(DurableAgentError):
    """A hook raised, or returned something other than what it rewrites."""


@dataclass(frozen=True)
class RoundHook:
    name: str
    kind: HookKind
    fn: Callable[..., Any]

    async def run(self, value: Any, context: HookContext) -> Any:
        outcome = self.fn(value, context)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        return value if outcome is None else outcome


HookFunction = Callable[[Any, HookContext], Any | Awaitable[Any]]


@overload
def round_hook(fn: HookFunction, /) -> RoundHook: ...


@overload
def round_hook(
    *, on: HookKind = "request", name: str | None = None, registry: Registers | None = None
) -> Callable[[HookFunction], RoundHook]: ...


def round_hook(
    fn: HookFunction | None = None,
    /,
    *,
    on: HookKind = "request",
    name: str | None = None,
    registry: Registers | None = None,
) -> RoundHook | Callable[[HookFunction], RoundHook]:
    """A hook over each model call (added to ``registry``, when one is given): ``on=
    "request"`` takes ``(messages, context)`` and returns the messages to send;
    ``on="reply"`` takes ``(reply, context)`` and returns the reply to record. Returning
    ``None`` keeps what it was given. It may be async."""

    def wrap(f: HookFunction) -> RoundHook:
        built = RoundHook(name=name or f.__name__, kind=on, fn=f)
        if registry is not None:
            registry.add(built)
        return built

    return wrap(fn) if fn is not None else wrap


class HasRoundHooks(Protocol):
    """A worker's registry, as hooks are looked up in it."""

    def round_hook(self, name: str) -> Any: ...


def _found(registry: HasRoundHooks, name: str, kind: HookKind) -> RoundHook:
    hook = registry.round_hook(name)
    if not isinstance(hook, RoundHook) or hook.kind != kind:
        raise HookFailed(f"no {kind} hook named {name!r} is loaded on this worker")
    return hook


async def rewrite_request(
    registry: HasRoundHooks, names: Sequence[str], messages: list[Message], context: HookContext
) -> list[Message]:
    rewritten: list[Message] = await _rewrite(
        registry, names, "request", messages, context, _MESSAGES.validate_python
    )
    return rewritten


async def rewrite_reply(
    registry: HasRoundHooks, names: Sequence[str], reply: AssistantMessage, context: HookContext
) -> AssistantMessage:
    rewritten: AssistantMessage = await _rewrite(
        registry, names, "reply", reply, context, AssistantMessage.model_validate
    )
    return rewritten


async def _rewrite(
    registry: HasRoundHooks,
    names: Sequence[str],
    kind: HookKind,
    value: Any,
    context: HookContext,
    validate: Callable[[Any], Any],
) -> Any:
    """``value`` through each named hook of ``kind`` in turn, each output checked to be
    what that kind rewrites (``HookFailed`` otherwise, or when a hook raises)."""
    for name in names:
        hook = _found(registry, name, kind)
        try:
            value = validate(await hook.run(value, context))
        except Exception as error:
            raise HookFailed(f"{kind} hook {name!r} failed: {error}") from None
    return value


# Guardrails: functions that may stop a user message or a final answer.
#
# A guardrail takes the text and returns ``None`` (allowed) or the reason it is
# denied; it may be async. Workers load guardrails as they load tools, and a spec
# names the ones a session runs (``guardrails.input`` / ``guardrails.output``); they
# run as activities, first denial wins.

GuardrailFunction = Callable[[str], str | Awaitable[str | None] | None]


@dataclass(frozen=True)
class Guardrail:
    name: str
    check: GuardrailFunction

    async def verdict(self, text: str) -> str | None:
        """The reason ``text`` is denied, or ``None``."""
        outcome = self.check(text)
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome is not None and not isinstance(outcome, str):
            raise TypeError(
                f"guardrail {self.name!r} returned {outcome!r}: return None to allow, "
                "or the reason to deny"
            )
        return outcome or None


@overload
def guardrail(fn: GuardrailFunction, /) -> Guardrail: ...


@overload
def guardrail(
    *, name: str | None = None, registry: Registers | None = None
) -> Callable[[GuardrailFunction], Guardrail]: ...


def guardrail(
    fn: GuardrailFunction | None = None,
    /,
    *,
    name: str | None = None,
    registry: Registers | None = None,
) -> Guardrail | Callable[[GuardrailFunction], Guardrail]:
    """A guardrail (added to ``registry``, when one is given). Usable bare
    (``@guardrail``) or with options; a worker has the ones its ``Registry`` holds."""

    def wrap(f: GuardrailFunction) -> Guardrail:
        built = Guardrail(name=name or f.__name__, check=f)
        if registry is not None:
            registry.add(built)
        return built

    return wrap(fn) if fn is not None else wrap
