"""Test doubles that speak the real protocols over real sockets, for our tests and yours;
``AgentTestEnvironment`` runs your agents end to end against a scripted model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._models import FunctionModel, ModelFunction, ModelRequest, TestModel, value_for
from ._rate_limited import RateLimitedModel
from ._rerun import rerun
from ._scripted_provider import (
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

if TYPE_CHECKING:
    from ._environment import AgentTestEnvironment, approve_all


def __getattr__(name: str) -> Any:
    # the environment brings a server and a worker: imported only when asked for
    if name in ("AgentTestEnvironment", "approve_all"):
        from ._environment import AgentTestEnvironment, approve_all

        return {"AgentTestEnvironment": AgentTestEnvironment, "approve_all": approve_all}[name]
    raise AttributeError(f"module 'durable_agent.testing' has no attribute {name!r}")


__all__ = [
    "AgentTestEnvironment",
    "FunctionModel",
    "ModelFunction",
    "ModelRequest",
    "RateLimitedModel",
    "RecordedRequest",
    "Reply",
    "ScriptedProvider",
    "TestModel",
    "approve_all",
    "assistant_calls",
    "assistant_text",
    "chat_completion_body",
    "chat_stream_events",
    "error_reply",
    "json_reply",
    "rerun",
    "sse_reply",
    "value_for",
]
