"""``durable-agent serve`` as an ASGI app of your own: the HTTP gateway (REST, SSE, AG-UI
and the OpenAI-compatible endpoints) and the web console, with the access rule each
request passes."""

from ._app import create_app
from ._guard import AccessError, GatewayAccess

__all__ = ["AccessError", "GatewayAccess", "create_app"]
