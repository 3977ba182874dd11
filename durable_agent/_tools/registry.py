"""``Registry``: everything one worker runs or speaks, by name.

A worker's owner makes one and gives it to the worker (``DurableAgentPlugin(registry=
...)``): the tools a spec may name, the guardrails, round hooks, approval predicates
and escalation notifiers it may use, the kinds of tool it can run and the wire APIs it
speaks. Nothing is registered by importing a module: two workers in one process can
hold different things, and a module that defines a ``@tool`` may be imported again (a
workflow sandbox does) without a clash. ``Registry.from_modules`` collects what
modules define, for a worker started from the command line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any, TypeGuard

from durable_agent._contracts.boundary import GuardrailInput, GuardrailVerdict
from durable_agent._spec.tool_kinds import (
    BUILT_IN_KINDS,
    CallTarget,
    OtherTarget,
    ToolKind,
    UnknownToolKind,
)
from durable_agent._wire.codecs import BUILT_IN_CODECS, Codec

from .functions import NamedHook, Tool
from .hooks import Guardrail, RoundHook
from .mcp_servers import McpRunner
from .openapi import OpenApiRunner

Registrable = Tool | Guardrail | RoundHook | NamedHook | ToolKind[Any, Any] | Codec
"""What a ``Registry`` holds: a ``@tool``, a ``@guardrail``, a ``@round_hook``, an
``@approval_predicate`` or ``@escalation_notifier``, a ``ToolKind`` or a ``Codec``."""


class Registry:
    """What one worker can run and speak. Starts with the built-in tool kinds and wire
    APIs; ``add`` (or the constructor) takes the rest. A name holds one thing: adding a
    different thing under a taken name is an error (the same thing again is not)."""

    def __init__(self, items: Iterable[Registrable] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._guardrails: dict[str, Guardrail] = {}
        self._hooks: dict[str, Callable[..., Any]] = {}
        self._round_hooks: dict[str, RoundHook] = {}
        self._kinds: dict[str, ToolKind[Any, Any]] = dict(BUILT_IN_KINDS)
        for runner in (McpRunner(), OpenApiRunner()):  # the halves that do I/O
            self._kinds[runner.name] = runner
        self._codecs: dict[str, Codec] = dict(BUILT_IN_CODECS)
        for item in items:
            self.add(item)

    @classmethod
    def from_modules(cls, names: Iterable[str]) -> Registry:
        """What the named modules define at their top level (tools, guardrails, hooks,
        kinds, codecs, and the contents of any ``Registry``), each module imported."""
        registry = cls()
        for name in names:
            registry.include(importlib.import_module(name))
        return registry

    def include(self, module: ModuleType) -> None:
        """Add what ``module`` defines at its top level."""
        for value in vars(module).values():
            if isinstance(value, Registry):
                self.merge(value)
            elif _registrable(value):
                self.add(value)

    def merge(self, other: Registry) -> None:
        """Add everything ``other`` holds."""
        items: list[Registrable] = [*other._tools.values(), *other._guardrails.values()]
        items += [*other._round_hooks.values(), *other._kinds.values()]
        for item in items:
            self.add(item)
        for name, fn in other._hooks.items():
            self.add(NamedHook(name, fn))
        for codec in other._codecs.values():
            self.add(codec)

    def add(self, item: Registrable) -> None:
        if isinstance(item, Tool):
            _put(self._tools, item.name, item, "tool", lambda t: t.handler)
        elif isinstance(item, Guardrail):
            _put(self._guardrails, item.name, item, "guardrail", lambda g: g.check)
        elif isinstance(item, RoundHook):
            _put(self._round_hooks, item.name, item, "hook", lambda h: h.fn)
        elif isinstance(item, NamedHook):
            _put(self._hooks, item.name, item.fn, "approval hook", lambda fn: fn)
        elif isinstance(item, ToolKind):
            self._add_kind(item)
        elif isinstance(item, Codec):
            self._add_codec(item)
        else:
            raise TypeError(
                f"{item!r} cannot be registered: give a @tool, @guardrail, @round_hook, "
                "@approval_predicate or @escalation_notifier, a ToolKind or a Codec"
            )

    def _add_kind(self, kind: ToolKind[Any, Any]) -> None:
        known = self._kinds.get(kind.name)
        if known is not None and type(known).__qualname__ != type(kind).__qualname__:
            raise ValueError(f"tool kind {kind.name!r} is registered already")
        if known is None and kind.runs_in != "worker":
            raise ValueError(f"tool kind {kind.name!r}: a registered kind runs on a worker")
        if known is None and kind.call is not None:
            raise ValueError(
                f"tool kind {kind.name!r} sets call: a registered kind's calls carry the "
                "recorded target, and its run looks up anything more on the worker"
            )
        self._kinds[kind.name] = kind  # the same kind again: configured anew

    def _add_codec(self, codec: Codec) -> None:
        if not codec.api or codec.api != codec.api.strip():
            raise ValueError(f"a wire API needs a plain name, got {codec.api!r}")
        _put(self._codecs, codec.api, codec, "wire API", lambda c: c)

    # --- looking up -----------------------------------------------------------------

    def get(self, name: str) -> Tool | None:
        """The function tool of this name."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        """The function tools' names, sorted."""
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        """Whether a function tool of this name is here."""
        return name in self._tools

    def guardrail(self, name: str) -> Guardrail | None:
        return self._guardrails.get(name)

    def hook(self, name: str) -> Callable[..., Any] | None:
        """The approval predicate or escalation notifier of this name."""
        return self._hooks.get(name)

    def round_hook(self, name: str) -> RoundHook | None:
        return self._round_hooks.get(name)

    def kind(self, name: str) -> ToolKind[Any, Any]:
        """The kind of this name; ``UnknownToolKind`` lists the ones this worker has."""
        found = self._kinds.get(name)
        if found is None:
            known = ", ".join(self.kinds())
            raise UnknownToolKind(f"no tool kind {name!r} on this worker (registered: {known})")
        return found

    def kinds(self) -> list[str]:
        return sorted(self._kinds)

    def call_of(self, target: CallTarget) -> tuple[ToolKind[Any, Any], CallTarget]:
        """The kind a call's target names, and the target read as that kind's model (a
        kind not built in comes as an ``OtherTarget``, its recorded target as it was)."""
        kind = self.kind(target.kind)
        if isinstance(target, OtherTarget):
            target = kind.target.model_validate(target.model_dump())
        return kind, target

    def codec(self, api: str) -> Codec:
        """The codec of ``api``; ``ValueError`` names the APIs this worker speaks."""
        found = self._codecs.get(api)
        if found is None:
            known = ", ".join(self.apis())
            raise ValueError(f"unknown wire API {api!r}: this worker speaks {known}")
        return found

    def apis(self) -> list[str]:
        return sorted(self._codecs)

    @property
    def codecs(self) -> Mapping[str, Codec]:
        return dict(self._codecs)


def _registrable(value: object) -> TypeGuard[Registrable]:
    """Whether a module's top-level ``value`` is something a registry holds (a class
    is not, even one with a codec's methods)."""
    if isinstance(value, type):
        return False
    if isinstance(value, Tool | Guardrail | RoundHook | NamedHook | ToolKind):
        return True
    return isinstance(value, Codec) and isinstance(getattr(value, "api", None), str)


def _put(
    table: dict[str, Any], name: str, item: Any, what: str, same: Callable[[Any], Any]
) -> None:
    """``item`` under ``name``, unless a different one holds it."""
    known = table.get(name)
    if known is not None and same(known) is not same(item):
        raise ValueError(f"a different {what} named {name!r} is already registered")
    table[name] = item


async def run_guardrails(registry: Registry, request: GuardrailInput) -> GuardrailVerdict:
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
