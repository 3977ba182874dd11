"""Writing tools and what runs beside them on a worker: ``@tool``, guardrails, round hooks,
approval predicates and escalation notifiers, and the registry that holds them."""

from __future__ import annotations

from ._guardrails import guardrail, run_guardrails
from ._round_hooks import HookContext, HookFailed, rewrite_reply, rewrite_request, round_hook
from ._tool import (
    Tool,
    ToolRegistry,
    approval_predicate,
    default_registry,
    escalation_notifier,
    schema_tool,
    tool,
)

__all__ = [
    "HookContext",
    "HookFailed",
    "Tool",
    "ToolRegistry",
    "approval_predicate",
    "default_registry",
    "escalation_notifier",
    "guardrail",
    "rewrite_reply",
    "rewrite_request",
    "round_hook",
    "run_guardrails",
    "schema_tool",
    "tool",
]
