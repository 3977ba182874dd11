"""``durable-agent serve`` as an ASGI app of your own: the HTTP gateway (REST, SSE, AG-UI
and the OpenAI-compatible endpoints) and the web console, with the access rule each
request passes.

Its modules:

- ``_app``: ``create_app``: the REST API, the event stream and the console.
- ``_guard``: who may call, from where, and who they are.
- ``_context``: what every entry point shares: the client, the caller, one access check.
- ``_agui``: the AG-UI endpoint, and live events in AG-UI's encoding.
- ``_ai_sdk``: the Vercel AI SDK's chat protocol (``useChat``) and its UI message stream.
- ``_a2a``: each agent as an A2A agent: its card, and JSON-RPC in 1.0 and 0.3.
- ``_openai_chat``: ``/v1/chat/completions`` and ``/v1/models``.
- ``_openai_responses``: ``/v1/responses``, streamed and not.
- ``_openai_common``: what the OpenAI-compatible endpoints share.
- ``_codec_endpoint``: the codec endpoint the Temporal UI decodes through.
- ``_mcp_server``: ``durable-agent mcp-serve``: agents as MCP tools."""

from ._app import create_app
from ._guard import AccessError, GatewayAccess

__all__ = ["AccessError", "GatewayAccess", "create_app"]
