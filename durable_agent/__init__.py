"""durable-agent: LLM agents that run durably on Temporal.

The conversation is one ordered array of OpenAI-chat-shaped messages; that array is
the replayable workflow state. Here is what a program that defines agents and talks to
them needs: the agent and its tools, the spec, the messages, the client and the errors.
The rest of the public face is five modules by job: ``durable_agent.temporal`` (the
worker, its plugin, agents inside your own workflows), ``durable_agent.capabilities``
(what a worker lets sessions use), ``durable_agent.testing``, ``durable_agent.gateway``
and ``durable_agent.extending`` (a new wire API or tool kind). Every other module is
private: its name starts with an underscore, and it may change in any release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # each public name, once; at run time it loads on first use (below)
    from durable_agent._agents import Agent as Agent
    from durable_agent._agents import RunResult as RunResult
    from durable_agent._client.handle import SessionHandle as SessionHandle
    from durable_agent._client.results import DecisionRefusedError as DecisionRefusedError
    from durable_agent._client.results import NoWorkerError as NoWorkerError
    from durable_agent._client.results import SessionFailedError as SessionFailedError
    from durable_agent._client.sessions import AgentClient as AgentClient
    from durable_agent._contracts.approvals import PendingApproval as PendingApproval
    from durable_agent._contracts.boundary import AgentResult as AgentResult
    from durable_agent._contracts.boundary import AgentRunError as AgentRunError
    from durable_agent._errors import DurableAgentError as DurableAgentError
    from durable_agent._errors import WakeUpRefused as WakeUpRefused
    from durable_agent._spec.document import AgentSpec as AgentSpec
    from durable_agent._spec.document import ModelSpec as ModelSpec
    from durable_agent._spec.tools import McpServerSpec as McpServerSpec
    from durable_agent._spec.tools import OpenApiSpec as OpenApiSpec
    from durable_agent._spec.tools import ToolContext as ToolContext
    from durable_agent._tools.functions import approval_predicate as approval_predicate
    from durable_agent._tools.functions import escalation_notifier as escalation_notifier
    from durable_agent._tools.functions import tool as tool
    from durable_agent._tools.hooks import HookContext as HookContext
    from durable_agent._tools.hooks import guardrail as guardrail
    from durable_agent._tools.hooks import round_hook as round_hook
    from durable_agent._tools.registry import Registry as Registry
    from durable_agent._wire.messages import AssistantMessage as AssistantMessage
    from durable_agent._wire.messages import Message as Message
    from durable_agent._wire.messages import SystemMessage as SystemMessage
    from durable_agent._wire.messages import ToolMessage as ToolMessage
    from durable_agent._wire.messages import UserMessage as UserMessage
    from durable_agent._wire.messages import audio_part as audio_part
    from durable_agent._wire.messages import image_part as image_part
    from durable_agent._wire.messages import parse_messages as parse_messages
    from durable_agent._wire.messages import user_message as user_message


#: Each public name and the module that defines it, written out (not read from the
#: source) so that an install holding only bytecode finds them; a test keeps this and
#: the imports above the same. ``import durable_agent`` itself imports nothing: the CLI
#: starts quickly, a client loads only the client's modules, and the workflow sandbox,
#: which imports this package afresh for each run, passes the pure modules through
#: instead of importing second copies.
_PUBLIC: dict[str, str] = {
    "Agent": "durable_agent._agents",
    "AgentClient": "durable_agent._client.sessions",
    "AgentResult": "durable_agent._contracts.boundary",
    "AgentRunError": "durable_agent._contracts.boundary",
    "AgentSpec": "durable_agent._spec.document",
    "approval_predicate": "durable_agent._tools.functions",
    "AssistantMessage": "durable_agent._wire.messages",
    "audio_part": "durable_agent._wire.messages",
    "DecisionRefusedError": "durable_agent._client.results",
    "DurableAgentError": "durable_agent._errors",
    "WakeUpRefused": "durable_agent._errors",
    "escalation_notifier": "durable_agent._tools.functions",
    "guardrail": "durable_agent._tools.hooks",
    "HookContext": "durable_agent._tools.hooks",
    "image_part": "durable_agent._wire.messages",
    "McpServerSpec": "durable_agent._spec.tools",
    "Message": "durable_agent._wire.messages",
    "ModelSpec": "durable_agent._spec.document",
    "NoWorkerError": "durable_agent._client.results",
    "OpenApiSpec": "durable_agent._spec.tools",
    "parse_messages": "durable_agent._wire.messages",
    "PendingApproval": "durable_agent._contracts.approvals",
    "Registry": "durable_agent._tools.registry",
    "round_hook": "durable_agent._tools.hooks",
    "RunResult": "durable_agent._agents",
    "SessionFailedError": "durable_agent._client.results",
    "SessionHandle": "durable_agent._client.handle",
    "SystemMessage": "durable_agent._wire.messages",
    "tool": "durable_agent._tools.functions",
    "ToolContext": "durable_agent._spec.tools",
    "ToolMessage": "durable_agent._wire.messages",
    "user_message": "durable_agent._wire.messages",
    "UserMessage": "durable_agent._wire.messages",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'durable_agent' has no attribute {name!r}")
    # through ``__import__``, as an import statement goes: a workflow sandbox that passes
    # durable_agent through sees this import and passes it through too
    value = getattr(__import__(module, fromlist=[name]), name)
    globals()[name] = value  # once loaded, an attribute like any other
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
