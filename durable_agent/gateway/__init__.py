"""``durable-agent serve``: the HTTP gateway (REST, SSE and AG-UI), its shared
per-session polls and the web console page."""

from ._app import create_app
from ._guard import AccessError, GatewayAccess
from ._mcp_door import mcp_http_app, mcp_server

__all__ = [
    "AccessError",
    "GatewayAccess",
    "create_app",
    "mcp_http_app",
    "mcp_server",
]
