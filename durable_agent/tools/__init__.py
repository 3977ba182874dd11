"""Writing tools and what runs beside them on a worker: ``@tool``, guardrails, round hooks,
approval predicates and escalation notifiers, and the ``Registry`` that holds them (with
the kinds of tool and the wire APIs a worker has)."""

from __future__ import annotations

from ._guardrails import Guardrail, guardrail
from ._mcp import McpRunner, McpServerError, error_reason, list_server_tools
from ._openapi import OpenApiRunner, list_api_tools
from ._registry import Registrable, Registry, run_guardrails
from ._round_hooks import (
    HookContext,
    HookFailed,
    RoundHook,
    rewrite_reply,
    rewrite_request,
    round_hook,
)
from ._tool import NamedHook, Tool, approval_predicate, escalation_notifier, schema_tool, tool

__all__ = [
    "Guardrail",
    "HookContext",
    "HookFailed",
    "McpRunner",
    "McpServerError",
    "NamedHook",
    "OpenApiRunner",
    "Registrable",
    "Registry",
    "RoundHook",
    "Tool",
    "approval_predicate",
    "error_reason",
    "escalation_notifier",
    "guardrail",
    "list_api_tools",
    "list_server_tools",
    "rewrite_reply",
    "rewrite_request",
    "round_hook",
    "run_guardrails",
    "schema_tool",
    "tool",
]
