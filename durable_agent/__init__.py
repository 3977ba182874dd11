"""durable-agent: LLM agents that run durably on Temporal.

The conversation is one ordered array of OpenAI-chat-shaped messages; that
array is the replayable workflow state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from durable_agent._version import __version__
from durable_agent.messages import (
    ApprovalRecord,
    AssistantMessage,
    AudioPart,
    ContentPart,
    FilePart,
    FunctionCall,
    ImagePart,
    Message,
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
from durable_agent.tool_definition import ToolDefinition

if TYPE_CHECKING:
    from durable_agent.client import AgentClient


def __getattr__(name: str) -> Any:
    # The client pulls in temporalio's client; the pure model should not.
    if name == "AgentClient":
        from durable_agent.client import AgentClient

        return AgentClient
    raise AttributeError(f"module 'durable_agent' has no attribute {name!r}")


__all__ = [
    "AgentClient",
    "ApprovalRecord",
    "AssistantMessage",
    "AudioPart",
    "ContentPart",
    "FilePart",
    "FunctionCall",
    "ImagePart",
    "Message",
    "ModelOptions",
    "ReasoningWire",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolDefinition",
    "ToolMessage",
    "Usage",
    "UserMessage",
    "__version__",
    "audio_part",
    "dump_messages",
    "file_part",
    "file_part_from_id",
    "image_part",
    "image_part_from_bytes",
    "pair_tool_results",
    "parse_message",
    "parse_messages",
    "prepare_request_messages",
    "repair_pairing",
    "text_part",
    "user_message",
]
