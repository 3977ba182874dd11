"""Test doubles that speak the real protocols over real sockets, for our tests and yours."""

from durable_agent.testing.scripted_provider import (
    RecordedRequest,
    Reply,
    ScriptedProvider,
    assistant_calls,
    assistant_text,
    chat_completion_body,
    chat_stream_events,
    error_reply,
    json_reply,
    sse_reply,
)

__all__ = [
    "RecordedRequest",
    "Reply",
    "ScriptedProvider",
    "assistant_calls",
    "assistant_text",
    "chat_completion_body",
    "chat_stream_events",
    "error_reply",
    "json_reply",
    "sse_reply",
]
