"""durable-agent: LLM agents that run durably on Temporal.

The conversation is one ordered array of OpenAI-chat-shaped messages; that array is
the replayable workflow state. What most programs need is here: an ``Agent`` and its
tools, the spec that describes a session, what a worker's owner registers, the client,
and the message model. Everything else is in the packages by job: ``durable_agent.core``
(the pure core), ``.session``, ``.tools``, ``.client``, ``.temporal``, ``.gateway``,
``.testing``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable_agent._version import __version__ as __version__

if TYPE_CHECKING:  # each public name, once; at run time it loads on first use (below)
    from durable_agent.activities import JSONLMessageLog as JSONLMessageLog
    from durable_agent.activities import MessageContext as MessageContext
    from durable_agent.agents import Agent as Agent
    from durable_agent.agents import RunResult as RunResult
    from durable_agent.capabilities import Capabilities as Capabilities
    from durable_agent.capabilities import SecretGrant as SecretGrant
    from durable_agent.capabilities import SpecPolicy as SpecPolicy
    from durable_agent.client import AgentClient as AgentClient
    from durable_agent.core import AgentResult as AgentResult
    from durable_agent.core import AgentSpec as AgentSpec
    from durable_agent.core import ApproverKey as ApproverKey
    from durable_agent.core import AssistantMessage as AssistantMessage
    from durable_agent.core import DurableAgentError as DurableAgentError
    from durable_agent.core import LiveEvent as LiveEvent
    from durable_agent.core import McpServerSpec as McpServerSpec
    from durable_agent.core import Message as Message
    from durable_agent.core import ModelPrice as ModelPrice
    from durable_agent.core import ModelSpec as ModelSpec
    from durable_agent.core import OpenApiSpec as OpenApiSpec
    from durable_agent.core import PendingApproval as PendingApproval
    from durable_agent.core import ProviderEndpoint as ProviderEndpoint
    from durable_agent.core import ProviderLimits as ProviderLimits
    from durable_agent.core import SessionStatus as SessionStatus
    from durable_agent.core import SystemMessage as SystemMessage
    from durable_agent.core import ToolContext as ToolContext
    from durable_agent.core import ToolMessage as ToolMessage
    from durable_agent.core import UserMessage as UserMessage
    from durable_agent.core import audio_part as audio_part
    from durable_agent.core import image_part as image_part
    from durable_agent.core import parse_messages as parse_messages
    from durable_agent.core import user_message as user_message
    from durable_agent.temporal import DurableAgentPlugin as DurableAgentPlugin
    from durable_agent.temporal import build_worker as build_worker
    from durable_agent.tools import HookContext as HookContext
    from durable_agent.tools import Registry as Registry
    from durable_agent.tools import approval_predicate as approval_predicate
    from durable_agent.tools import escalation_notifier as escalation_notifier
    from durable_agent.tools import guardrail as guardrail
    from durable_agent.tools import round_hook as round_hook
    from durable_agent.tools import tool as tool


#: Each public name and the package it comes from: the names above, written out so an
#: install with only bytecode (no source to read) finds them; a test keeps the two the
#: same. ``import durable_agent`` itself imports nothing: the CLI starts quickly, and the
#: workflow sandbox, which imports this package afresh for each run, takes the pure
#: packages it needs as passed-through imports, never second copies of them.
_PUBLIC: dict[str, str] = {
    "Agent": "durable_agent.agents",
    "AgentClient": "durable_agent.client",
    "AgentResult": "durable_agent.core",
    "AgentSpec": "durable_agent.core",
    "approval_predicate": "durable_agent.tools",
    "ApproverKey": "durable_agent.core",
    "AssistantMessage": "durable_agent.core",
    "audio_part": "durable_agent.core",
    "build_worker": "durable_agent.temporal",
    "Capabilities": "durable_agent.capabilities",
    "DurableAgentError": "durable_agent.core",
    "DurableAgentPlugin": "durable_agent.temporal",
    "escalation_notifier": "durable_agent.tools",
    "guardrail": "durable_agent.tools",
    "HookContext": "durable_agent.tools",
    "image_part": "durable_agent.core",
    "JSONLMessageLog": "durable_agent.activities",
    "LiveEvent": "durable_agent.core",
    "McpServerSpec": "durable_agent.core",
    "Message": "durable_agent.core",
    "MessageContext": "durable_agent.activities",
    "ModelPrice": "durable_agent.core",
    "ModelSpec": "durable_agent.core",
    "OpenApiSpec": "durable_agent.core",
    "parse_messages": "durable_agent.core",
    "PendingApproval": "durable_agent.core",
    "ProviderEndpoint": "durable_agent.core",
    "ProviderLimits": "durable_agent.core",
    "Registry": "durable_agent.tools",
    "round_hook": "durable_agent.tools",
    "RunResult": "durable_agent.agents",
    "SecretGrant": "durable_agent.capabilities",
    "SessionStatus": "durable_agent.core",
    "SpecPolicy": "durable_agent.capabilities",
    "SystemMessage": "durable_agent.core",
    "tool": "durable_agent.tools",
    "ToolContext": "durable_agent.core",
    "ToolMessage": "durable_agent.core",
    "user_message": "durable_agent.core",
    "UserMessage": "durable_agent.core",
}


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted(_PUBLIC)
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
