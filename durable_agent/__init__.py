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

from importlib import import_module
from typing import Any

# Every name is imported when first used, so ``import durable_agent`` runs nothing (type
# checkers read the names' types in ``__init__.pyi``): the workflow sandbox imports this
# package afresh for each run, and the pure modules it then needs come in as passed-through
# imports, not as second copies (a second copy of a class is a different class to
# ``isinstance``). It also keeps the CLI's start quick.
_EXPORTS: dict[str, str] = {
    "Agent": "durable_agent.agent",
    "AgentRunError": "durable_agent.agent",
    "RunResult": "durable_agent.agent",
    "AgentClient": "durable_agent.client",
    "AgentInput": "durable_agent.spec",
    "AgentResult": "durable_agent.contracts",
    "AgentSpec": "durable_agent.spec",
    "approval_predicate": "durable_agent.tools",
    "ApprovalRecord": "durable_agent.messages",
    "ApprovalRule": "durable_agent.approval_policy",
    "ApprovalSettings": "durable_agent.approval_policy",
    "ApproverKey": "durable_agent.approver_tokens",
    "ArgumentTest": "durable_agent.approval_policy",
    "AssistantMessage": "durable_agent.messages",
    "audio_part": "durable_agent.messages",
    "AudioPart": "durable_agent.messages",
    "ContentPart": "durable_agent.messages",
    "SpecPolicy": "durable_agent.capabilities",
    "SecretGrant": "durable_agent.capabilities",
    "OpenApiSpec": "durable_agent.spec",
    "McpServerSpec": "durable_agent.spec",
    "ToolsetSpec": "durable_agent.spec",
    "ToolKind": "durable_agent.tool_kinds",
    "ToolTarget": "durable_agent.tool_kinds",
    "register_tool_kind": "durable_agent.tool_kinds",
    "Capabilities": "durable_agent.capabilities",
    "ContextRules": "durable_agent.context",
    "DurableAgentPlugin": "durable_agent.plugin",
    "DecisionRefusedError": "durable_agent.approval_client",
    "dump_messages": "durable_agent.messages",
    "escalation_notifier": "durable_agent.tools",
    "file_part": "durable_agent.messages",
    "file_part_from_id": "durable_agent.messages",
    "file_part_from_url": "durable_agent.messages",
    "FilePart": "durable_agent.messages",
    "FlushMessage": "durable_agent.messages",
    "FunctionCall": "durable_agent.messages",
    "guardrail": "durable_agent.guardrails",
    "HookContext": "durable_agent.round_hooks",
    "round_hook": "durable_agent.round_hooks",
    "image_part": "durable_agent.messages",
    "image_part_from_bytes": "durable_agent.messages",
    "ImagePart": "durable_agent.messages",
    "LiveEvent": "durable_agent.events",
    "JSONLMessageLog": "durable_agent.message_sinks",
    "MessageContext": "durable_agent.message_sinks",
    "MessageSink": "durable_agent.message_sinks",
    "Message": "durable_agent.messages",
    "ModelOptions": "durable_agent.model_options",
    "ModelPrice": "durable_agent.spec",
    "ModelSpec": "durable_agent.spec",
    "pair_tool_results": "durable_agent.pairing",
    "parse_message": "durable_agent.messages",
    "parse_messages": "durable_agent.messages",
    "PendingApproval": "durable_agent.approval_contracts",
    "prepare_request_messages": "durable_agent.request_messages",
    "ProviderEndpoint": "durable_agent.endpoint",
    "ReasoningWire": "durable_agent.model_options",
    "repair_pairing": "durable_agent.pairing",
    "ResqueMessage": "durable_agent.messages",
    "schema_tool": "durable_agent.tools",
    "SessionChange": "durable_agent.client",
    "SessionStatus": "durable_agent.contracts",
    "SystemMessage": "durable_agent.messages",
    "text_part": "durable_agent.messages",
    "TextPart": "durable_agent.messages",
    "tool": "durable_agent.tools",
    "ToolCall": "durable_agent.messages",
    "ToolContext": "durable_agent.tools",
    "ToolDefinition": "durable_agent.tool_definition",
    "ToolMessage": "durable_agent.messages",
    "ToolPolicy": "durable_agent.tools",
    "ToolRegistry": "durable_agent.tools",
    "UnknownApprovalError": "durable_agent.approval_client",
    "Usage": "durable_agent.messages",
    "user_message": "durable_agent.messages",
    "UserMessage": "durable_agent.messages",
    "WaitOutcome": "durable_agent.client",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return import_module("durable_agent._version").__version__
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'durable_agent' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Agent",
    "AgentClient",
    "AgentInput",
    "AgentResult",
    "AgentRunError",
    "AgentSpec",
    "ApprovalRecord",
    "ApprovalRule",
    "ApprovalSettings",
    "ApproverKey",
    "ArgumentTest",
    "AssistantMessage",
    "AudioPart",
    "Capabilities",
    "ContentPart",
    "ContextRules",
    "DecisionRefusedError",
    "DurableAgentPlugin",
    "FilePart",
    "FlushMessage",
    "FunctionCall",
    "HookContext",
    "ImagePart",
    "JSONLMessageLog",
    "LiveEvent",
    "McpServerSpec",
    "Message",
    "MessageContext",
    "MessageSink",
    "ModelOptions",
    "ModelPrice",
    "ModelSpec",
    "OpenApiSpec",
    "PendingApproval",
    "ProviderEndpoint",
    "ReasoningWire",
    "ResqueMessage",
    "RunResult",
    "SecretGrant",
    "SessionChange",
    "SessionStatus",
    "SpecPolicy",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolKind",
    "ToolMessage",
    "ToolPolicy",
    "ToolRegistry",
    "ToolTarget",
    "ToolsetSpec",
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
    "file_part_from_url",
    "guardrail",
    "image_part",
    "image_part_from_bytes",
    "pair_tool_results",
    "parse_message",
    "parse_messages",
    "prepare_request_messages",
    "register_tool_kind",
    "repair_pairing",
    "round_hook",
    "schema_tool",
    "text_part",
    "tool",
    "user_message",
]
