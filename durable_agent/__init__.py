"""durable-agent: LLM agents that run durably on Temporal.

The conversation is one ordered array of OpenAI-chat-shaped messages; that
array is the replayable workflow state.

What most programs need is here: ``tool`` and ``ToolContext`` to write tools,
``guardrail`` to check what goes in and out,
``AgentSpec`` (with ``ModelSpec`` and ``ProviderEndpoint``) to describe an agent,
``AgentClient`` to start, steer, read and follow sessions, and the message model.
``durable_agent.testing`` has a scripted provider for tests; the codecs, the
provider client and the wire contracts are in their own modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable_agent._version import __version__
from durable_agent.approval_policy import ApprovalRule, ApprovalSettings, ArgumentTest
from durable_agent.context import ContextRules
from durable_agent.contracts import AgentResult, PendingApproval, SessionStatus
from durable_agent.endpoint import ProviderEndpoint
from durable_agent.events import LiveEvent
from durable_agent.guardrails import guardrail
from durable_agent.messages import (
    ApprovalRecord,
    AssistantMessage,
    AudioPart,
    ContentPart,
    FilePart,
    FlushMessage,
    FunctionCall,
    ImagePart,
    Message,
    ResqueMessage,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    audio_part,
    dump_messages,
    file_part,
    file_part_from_id,
    image_part,
    image_part_from_bytes,
    parse_message,
    parse_messages,
    text_part,
    user_message,
)
from durable_agent.model_options import ModelOptions, ReasoningWire
from durable_agent.pairing import pair_tool_results, repair_pairing
from durable_agent.request_messages import prepare_request_messages
from durable_agent.spec import AgentInput, AgentSpec, ModelPrice, ModelSpec
from durable_agent.tool_definition import ToolDefinition
from durable_agent.tools import (
    ToolContext,
    ToolPolicy,
    ToolRegistry,
    approval_predicate,
    escalation_notifier,
    schema_tool,
    tool,
)

if TYPE_CHECKING:
    from durable_agent.approval_client import DecisionRefusedError, UnknownApprovalError
    from durable_agent.approver_tokens import ApproverKey
    from durable_agent.client import AgentClient, SessionChange, WaitOutcome

_CLIENT_NAMES = (
    "AgentClient",
    "ApproverKey",
    "DecisionRefusedError",
    "SessionChange",
    "UnknownApprovalError",
    "WaitOutcome",
)


def __getattr__(name: str) -> Any:
    # The client pulls in temporalio's client; the pure model should not.
    if name in _CLIENT_NAMES:
        from durable_agent import client

        return getattr(client, name)
    raise AttributeError(f"module 'durable_agent' has no attribute {name!r}")


__all__ = [
    "AgentClient",
    "AgentInput",
    "AgentResult",
    "AgentSpec",
    "ApprovalRecord",
    "ApprovalRule",
    "ApprovalSettings",
    "ApproverKey",
    "ArgumentTest",
    "AssistantMessage",
    "AudioPart",
    "ContentPart",
    "ContextRules",
    "DecisionRefusedError",
    "FilePart",
    "FlushMessage",
    "FunctionCall",
    "ImagePart",
    "LiveEvent",
    "Message",
    "ModelOptions",
    "ModelPrice",
    "ModelSpec",
    "PendingApproval",
    "ProviderEndpoint",
    "ReasoningWire",
    "ResqueMessage",
    "SessionChange",
    "SessionStatus",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolMessage",
    "ToolPolicy",
    "ToolRegistry",
    "UnknownApprovalError",
    "Usage",
    "UserMessage",
    "WaitOutcome",
    "__version__",
    "approval_predicate",
    "audio_part",
    "dump_messages",
    "escalation_notifier",
    "file_part",
    "file_part_from_id",
    "guardrail",
    "image_part",
    "image_part_from_bytes",
    "pair_tool_results",
    "parse_message",
    "parse_messages",
    "prepare_request_messages",
    "repair_pairing",
    "schema_tool",
    "text_part",
    "tool",
    "user_message",
]
