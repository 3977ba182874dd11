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

from ._tool import Registers

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
