"""What a worker's owner lets sessions use, by name: model endpoints, MCP servers,
OpenAPI services, secrets and tool task queues.

A session's spec names these; the worker looks each name up here when the session
starts (``admission``) and again whenever it uses one (a model call, a tool call), so
an input that never went through admission (a forged continue-as-new, a session started
before the worker was upgraded) gets no further. Whatever a spec may still carry
inline is governed by the ``SpecPolicy``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from durable_agent.core import (
    APPROVAL_STRICTNESS,
    McpServerSpec,
    ModelPrice,
    NotAllowed,
    NotRegistered,
    OpenApiSpec,
    ProviderEndpoint,
    ProviderLimits,
)
from durable_agent.providers import model_from_environment

from ._policy import SpecPolicy
from ._urls import UrlRefused, check_url


@dataclass(frozen=True)
class SecretGrant:
    """A secret the worker holds, and who may receive it: the tools and, when given,
    only these parameters of theirs. A tool is named by what it is, not by the name a
    session shows the model: a function tool by its registered name (``lookup``), an
    OpenAPI operation as ``openapi:SERVICE/OPERATION_ID``, an MCP tool as
    ``mcp:SERVER/TOOL`` (a prefix a spec puts on tool names changes none of these).
    ``variable``: the environment variable (or the ``secrets`` provider's name) holding
    it; the secret's own name by default."""

    tools: Collection[str]
    parameters: Collection[str] | None = None
    variable: str | None = None

    def admits(self, tool: str, parameter: str | None) -> bool:
        if tool not in self.tools:
            return False
        return self.parameters is None or parameter in self.parameters


def default_models() -> dict[str, ProviderEndpoint]:
    """With nothing registered: OpenAI, or the OpenAI-compatible server the worker's
    own ``OPENAI_BASE_URL`` names (the worker's environment is its owner's)."""
    model = model_from_environment()
    return {"openai": model.endpoint if model and not isinstance(model.endpoint, str) else
            ProviderEndpoint()}  # fmt: skip


def _listing(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def _same_endpoint(a: ProviderEndpoint, b: ProviderEndpoint) -> bool:
    """Where the request goes and which key it carries: what makes two endpoints one."""
    return (a.api, a.base_url, a.api_key_env, a.headers) == (b.api, b.base_url, b.api_key_env,
                                                              b.headers)  # fmt: skip


@dataclass
class Capabilities:
    """The worker's registries and its policy for anything else a spec carries."""

    models: Mapping[str, ProviderEndpoint] = field(default_factory=default_models)
    mcp_servers: Iterable[McpServerSpec] = ()
    openapi: Iterable[OpenApiSpec] = ()
    secrets: Mapping[str, SecretGrant] = field(default_factory=dict)
    task_queues: Collection[str] = ()
    """Task queues tool calls may be routed to (besides the session's own)."""
    policy: SpecPolicy = field(default_factory=SpecPolicy)
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    """What models cost, by model name: the price of a model a spec names without one
    (its calls' cost in the spend, the metrics, the timeline and cost budgets)."""
    limits: Mapping[str, ProviderLimits] = field(default_factory=dict)
    """Shared limits by registered endpoint name (every model on it), or by
    ``NAME/MODEL`` (that model alone, which then has no share of the endpoint's)."""

    def __post_init__(self) -> None:
        self.mcp_servers = tuple(self.mcp_servers)  # read more than once (with_agents)
        self.openapi = tuple(self.openapi)
        self._mcp = {s.name: s for s in self.mcp_servers}
        self._openapi = {a.name: a for a in self.openapi}
        for server in self._mcp.values():
            if server.command is None and server.url is None:
                raise ValueError(f"registered MCP server {server.name!r}: give command or url")
        for api in self._openapi.values():
            if api.document is None:
                raise ValueError(f"registered OpenAPI service {api.name!r}: give its document")
        for key in self.limits:
            if key.split("/", 1)[0] not in self.models:
                raise ValueError(
                    f"limits {key!r}: no registered model endpoint {key.split('/', 1)[0]!r} "
                    f"(registered: {_listing(self.models)})"
                )

    @classmethod
    def development(cls, **registered: object) -> Capabilities:
        """Everything a spec carries is allowed (``SpecPolicy.development``)."""
        return cls(policy=SpecPolicy.development(), **registered)  # type: ignore[arg-type]

    # -- model endpoints

    async def endpoint(self, ref: ProviderEndpoint | str) -> ProviderEndpoint:
        """The endpoint a spec names, or the inline one it carries when that is one the
        worker registered or the policy allows (its URL checked)."""
        if isinstance(ref, str):
            found = self.models.get(ref)
            if found is None:
                raise NotRegistered(
                    f"model endpoint {ref!r} is not registered on this worker "
                    f"(registered: {_listing(self.models)})"
                )
            return found
        if any(_same_endpoint(ref, known) for known in self.models.values()):
            return ref
        if not self.policy.inline_endpoints:
            raise NotAllowed(
                f"model endpoint {ref.base_url} (key from {ref.api_key_env or 'no variable'}) "
                "is not one this worker registered, and its policy does not let a spec give "
                f"its own; name a registered one ({_listing(self.models)})"
            )
        await self.check_url(ref.base_url)
        return ref

    def limits_for(
        self, endpoint: ProviderEndpoint | str, model: str
    ) -> tuple[str, ProviderLimits] | None:
        """The shared limit a call to ``model`` on ``endpoint`` counts against, and its
        key: the model's own, else its endpoint's. A registered name is its own; an
        inline endpoint counts against the first registered one it is a copy of."""
        if not self.limits:
            return None
        names = [endpoint] if isinstance(endpoint, str) else [
            name for name, known in self.models.items() if _same_endpoint(endpoint, known)
        ]  # fmt: skip
        for name in names:
            for key in (f"{name}/{model}", name):
                if key in self.limits:
                    return key, self.limits[key]
        return None

    # -- MCP servers and OpenAPI services

    async def mcp_server(self, spec: McpServerSpec) -> McpServerSpec:
        """The server to start or reach for a spec's entry: the registered one by that
        name (the spec may narrow its tools, rename their prefix and add approval), or
        the entry itself where the policy allows inline servers."""
        if spec.command is None and spec.url is None:
            return _narrowed(_registered(self._mcp, "MCP server", spec.name), spec)
        if not self.policy.inline_mcp:
            what = f"a command ({spec.command!r})" if spec.command else f"a URL ({spec.url})"
            raise NotAllowed(
                f"MCP server {spec.name!r}: a spec may not carry {what} on this worker; "
                f"name a registered server ({_listing(self._mcp)})"
            )
        if spec.url is not None:
            await self.check_url(spec.url)
        return spec

    async def openapi_service(self, spec: OpenApiSpec) -> OpenApiSpec:
        """The service for a spec's entry, as ``mcp_server`` does for servers."""
        if spec.document is None:
            return _narrowed(_registered(self._openapi, "OpenAPI service", spec.name), spec)
        if not self.policy.inline_openapi:
            raise NotAllowed(
                f"OpenAPI service {spec.name!r}: a spec may not carry its document "
                f"({spec.document!r}) on this worker; name a registered service "
                f"({_listing(self._openapi)})"
            )
        if "://" in spec.document:
            await self.check_url(spec.document)
        elif not self.policy.file_documents:
            raise NotAllowed(
                f"OpenAPI service {spec.name!r}: a spec may not name a file on the worker "
                f"({spec.document!r})"
            )
        if spec.base_url is not None:
            await self.check_url(spec.base_url)
        return spec

    def registered_service(self, name: str) -> OpenApiSpec | None:
        return self._openapi.get(name)

    def registered_server(self, name: str) -> McpServerSpec | None:
        return self._mcp.get(name)

    async def check_url(self, url: str) -> None:
        """A URL that came from a spec: refused when it reaches a private address and
        the policy does not allow that. Resolved at every use, not remembered: a name
        may point elsewhere later (the HTTP client resolves it again when it connects,
        so a name that changes in between is the one gap left)."""
        try:
            await check_url(url, private_allowed=self.policy.private_network)
        except UrlRefused as error:
            raise NotAllowed(str(error)) from None

    # -- secrets and task queues

    def secret_variable(self, name: str, tool: str | None, parameter: str | None) -> str:
        """Where the secret ``name`` is read from, for ``parameter`` of the tool whose
        identity is ``tool`` (``SecretGrant``; ``None``: a call whose kind names no
        identity, which receives no registered secret)."""
        grant = self.secrets.get(name)
        if grant is None:
            if self.policy.any_secret:
                return name
            raise NotRegistered(
                f"secret {name!r} is not registered on this worker "
                f"(registered: {_listing(self.secrets)})"
            )
        if tool is None or not grant.admits(tool, parameter):
            where = f"{tool or 'this tool'}({parameter})" if parameter else tool or "this tool"
            raise NotAllowed(f"secret {name!r} may not be given to {where} on this worker")
        return grant.variable or name

    def unknown_secrets(self, names: Iterable[str]) -> list[str]:
        return [] if self.policy.any_secret else sorted(set(names) - set(self.secrets))

    def task_queue_allowed(self, queue: str, own: str) -> bool:
        return self.policy.any_task_queue or queue == own or queue in self.task_queues


_Entry = TypeVar("_Entry", McpServerSpec, OpenApiSpec)


def _registered(table: dict[str, _Entry], kind: str, name: str) -> _Entry:
    """The entry registered as ``name``; ``NotRegistered`` listing the others."""
    found = table.get(name)
    if found is None:
        raise NotRegistered(
            f"{kind} {name!r} is not registered on this worker (registered: {_listing(table)})"
        )
    return found


def _narrowed(registered: _Entry, spec: _Entry) -> _Entry:
    """The registered entry, with what the spec may choose: fewer tools or operations,
    another prefix, a stricter approval."""
    update: dict[str, object] = {}
    chosen = spec.model_fields_set
    if "prefix" in chosen:
        update["prefix"] = spec.prefix
    if "approval" in chosen and (
        APPROVAL_STRICTNESS[spec.approval] > APPROVAL_STRICTNESS[registered.approval]
    ):
        update["approval"] = spec.approval
    narrowing = "allowed_tools" if isinstance(spec, McpServerSpec) else "operations"
    wanted, own = getattr(spec, narrowing), getattr(registered, narrowing)
    if wanted is not None:
        beyond = sorted(set(wanted) - set(own)) if own is not None else []
        if beyond:
            raise NotAllowed(
                f"{registered.name!r}: {narrowing} {', '.join(beyond)} are not among those "
                f"this worker registered ({', '.join(own or [])})"
            )
        update[narrowing] = wanted
    return registered.model_copy(update=update)
