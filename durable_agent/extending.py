"""What a new wire API or a new tool kind is made of: one module of yours, registered on
the worker's ``Registry`` (``docs/how-to/extending.md`` builds one of each).

A wire API is a ``Codec`` (a ``StreamingCodec`` when it streams), which ``WireCodec``
and ``StreamingWireCodec`` make of functions: the request body from the prepared
messages and tools, the reply back into an assistant message. A tool kind is a
``ToolKind``: how its tools are listed when a session starts (``ResolvedTool``) and how
one call runs on the worker (``WorkerSide`` holds what the worker's owner registered).
``NotRegistered`` and ``NotAllowed`` refuse a call; any other exception is the tool's
failure."""

from durable_agent._errors import NotAllowed, NotRegistered
from durable_agent._spec.tool_kinds import ResolvedTool, ToolKind, ToolTarget, WorkerSide
from durable_agent._spec.tools import ToolPolicy, ToolsetSpec
from durable_agent._wire.codecs import Codec, StreamingCodec, StreamingWireCodec, WireCodec
from durable_agent._wire.messages import ToolDefinition, text_of

__all__ = [
    "Codec",
    "NotAllowed",
    "NotRegistered",
    "ResolvedTool",
    "StreamingCodec",
    "StreamingWireCodec",
    "ToolDefinition",
    "ToolKind",
    "ToolPolicy",
    "ToolTarget",
    "ToolsetSpec",
    "WireCodec",
    "WorkerSide",
    "text_of",
]
