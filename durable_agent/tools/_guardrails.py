"""Guardrails: functions that may stop a user message or a final answer.

A guardrail takes the text and returns ``None`` (allowed) or the reason it is
denied; it may be async. Workers load guardrails as they load tools, and a spec
names the ones a session runs (``guardrails.input`` / ``guardrails.output``); they
run as activities, first denial wins.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import overload

from durable_agent.core import GuardrailInput, GuardrailVerdict

from ._tool import ToolRegistry, default_registry

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
    *, name: str | None = None, registry: ToolRegistry | None = None
) -> Callable[[GuardrailFunction], Guardrail]: ...


def guardrail(
    fn: GuardrailFunction | None = None,
    /,
    *,
    name: str | None = None,
    registry: ToolRegistry | None = None,
) -> Guardrail | Callable[[GuardrailFunction], Guardrail]:
    """Register a guardrail (in ``default_registry`` unless another ``registry`` is
    given). Usable bare (``@guardrail``) or with options."""

    def wrap(f: GuardrailFunction) -> Guardrail:
        built = Guardrail(name=name or f.__name__, check=f)
        (default_registry if registry is None else registry).add_guardrail(built)
        return built

    return wrap(fn) if fn is not None else wrap


async def run_guardrails(registry: ToolRegistry, request: GuardrailInput) -> GuardrailVerdict:
    """The named guardrails on the text, in order; the first denial is the verdict. A
    name no guardrail answers to is a ``LookupError``."""
    for name in request.names:
        found = registry.guardrail(name)
        if found is None:
            raise LookupError(f"no guardrail named {name!r} is loaded on this worker")
        reason = await found.verdict(request.text)
        if reason is not None:
            return GuardrailVerdict(allowed=False, reason=reason, by=name)
    return GuardrailVerdict(allowed=True)
