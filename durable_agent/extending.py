"""Extending a worker: the names a new wire API or a new tool kind is written with.

A worker speaks the wire APIs and runs the tool kinds its ``Registry`` holds: the
built-in ones, and those its owner adds. Each addition is one module of yours, and one
line that registers it beside the worker's tools: ``Registry([ollama, webhooks, ...])``
or ``registry.add(ollama)`` (a worker started from the command line finds them in a module
it loads with ``--tools``). The manual page ``docs/how-to/extending.md`` ("Extending
it: a new wire API, a new tool kind") builds one of each, and its code is run by the
test suite.

**A wire API** is a ``Codec``: how a request body is built from the prepared messages
and tools, how a response body becomes an assistant message, where the request goes
(the path after the endpoint's ``base_url``), the headers that carry the key, and what
its requests take (``takes`` parts besides text, ``takes_file_urls``,
``caches_prompts``, ``json_object``, ``output_cap``). An API that streams is a
``StreamingCodec``. ``WireCodec`` and ``StreamingWireCodec`` make either of plain
functions. An endpoint names the API it speaks (its ``api``, in Python or in a spec's
JSON); a session whose endpoint names an API its worker does not speak is refused at its
start.

**A tool kind** is a ``ToolKind``: what is recorded about one of its tools when a session
starts (its ``ToolTarget``: small, nothing secret, since it is workflow state), how its
tools are listed from a source a spec names in ``toolsets`` (a ``ToolsetSpec``; each tool
a ``ResolvedTool`` with its ``ToolDefinition`` and ``ToolPolicy``), and how a worker runs
one call (``WorkerSide`` holds what the worker's owner registered). A call returns the text the
model reads; ``NotRegistered`` and ``NotAllowed`` refuse it, and any other exception is
the tool's failure and costs one of its attempts. A session and a client read a target
of a kind they lack as it came, so only the worker needs the kind's code."""

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
