"""Where an MCP or OpenAPI tool call may go, decided on the worker at every call.

The call's input says which spec entry it belongs to; what that entry stands for (the
command, the URL, the header variables) is looked up in the worker's registries again
here, never taken from the input, since an input can be written by anyone who can
start a workflow. A registered OpenAPI service's calls must go to the service's own
origin (its base URL, or the one its document names).
"""

from __future__ import annotations

from durable_agent.activities.openapi import read_document
from durable_agent.capabilities import Capabilities, NotAllowed
from durable_agent.capabilities.urls import origin
from durable_agent.contracts import HttpCall, ToolCallInput
from durable_agent.openapi import base_url_of
from durable_agent.spec import McpServerSpec, OpenApiSpec

HeaderVariables = dict[str, str]
"""HTTP header -> the worker's environment variable holding its value."""


class RemoteAccess:
    """The worker's answer to "may this remote call go, and with what"."""

    def __init__(self, capabilities: Capabilities) -> None:
        self._capabilities = capabilities
        self._origins: dict[str, str] = {}

    async def target(self, call: ToolCallInput) -> McpServerSpec | HeaderVariables:
        """The MCP server to use, or the headers an HTTP call carries; ``NotAllowed``
        or ``NotRegistered`` when the worker does not let the call go."""
        if call.mcp is not None:
            return await self._capabilities.mcp_server(call.mcp.server)
        assert call.http is not None
        return await self._http_headers(call.http)

    async def _http_headers(self, call: HttpCall) -> HeaderVariables:
        url, name = call.operation.url, call.operation.api
        registered = self._capabilities.registered_service(name)
        if registered is None:
            if not self._capabilities.policy.inline_openapi:
                raise NotAllowed(f"OpenAPI service {name!r} is not registered on this worker")
            await self._capabilities.check_url(url)
            return call.headers
        expected = await self._origin(registered)
        if origin(url) != expected:
            raise NotAllowed(
                f"{url} is not at {expected}, where the registered service {name!r} lives"
            )
        return dict(registered.headers)

    async def _origin(self, service: OpenApiSpec) -> str:
        """The registered service's origin (its document read once per worker when it
        gives no base URL)."""
        known = self._origins.get(service.name)
        if known is None:
            base = service.base_url or base_url_of(await read_document(service), service)
            known = self._origins[service.name] = origin(base)
        return known
