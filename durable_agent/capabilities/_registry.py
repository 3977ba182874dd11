"""What a worker's owner lets sessions use, by name: model endpoints, tool sources (MCP
servers, OpenAPI services), secrets and tool task queues.

A session's spec names these; the worker looks each name up here when the session
starts (``admission``) and again whenever it uses one (a model call, a tool call), so
an input that never went through admission (a forged continue-as-new, a session started
before the worker was upgraded) gets no further. Whatever a spec may still carry
inline is governed by the ``SpecPolicy``, first in this file.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

from durable_agent._contracts.boundary import ResolvedTool
from durable_agent._errors import NotAllowed, NotRegistered
from durable_agent._providers import model_from_environment
from durable_agent._spec.document import McpServerSpec, ModelPrice, OpenApiSpec
from durable_agent._spec.endpoints import ProviderEndpoint, ProviderLimits
from durable_agent._spec.tool_kinds import WakeUpLimits
from durable_agent._spec.tools import OwnerGates, Registrable, ToolPolicy, narrowed
from durable_agent._wire.codecs.common import HostedCatalogue, hosted_as_sent
from durable_agent._wire.options import HostedTool, ModelOptions

from ._urls import UrlRefused, check_url, normalised_path, origin, rebuilt, under, url_host

# What a spec may carry besides names: the worker owner's choice, strict by default.

#: The kinds of tool source a spec can give whole: an MCP server (a command to run, or
#: a URL, with variables), an OpenAPI service (a document URL, a base URL, header
#: variables).
WHOLE_SOURCE_KINDS = ("mcp", "openapi")


@dataclass(frozen=True)
class SpecPolicy:
    """Kinds of field a session's spec may carry instead of naming what the worker
    registered. Each is off by default: whoever can start a session (any client of the
    namespace, the ``temporal`` CLI) is not trusted with the worker's machine. Turn them
    on only for local development, where the starter is the owner."""

    inline_endpoints: bool = False
    """Model endpoints given in the spec (a base URL and the variable holding its key)."""
    inline_sources: Collection[str] = field(default_factory=frozenset)
    """Kinds of tool source (a ``toolsets`` entry) given whole in the spec instead of
    naming one the worker registered: ``mcp`` (a command to start, or a URL, and the
    variables passed to them), ``openapi`` (a document URL, a base URL, header
    variables)."""
    worker_files: bool = False
    """Files on the worker a spec may name (an OpenAPI document's path)."""
    private_network: bool = False
    """URLs a spec carries may reach loopback, link-local and private addresses."""
    any_secret: bool = False
    """Any environment variable of the worker is a secret any tool may receive."""
    any_task_queue: bool = False
    """Tool calls may be routed to any task queue."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.inline_sources) - set(WHOLE_SOURCE_KINDS))
        if unknown:
            raise ValueError(
                f"inline_sources: {unknown[0]!r} is not a kind of source a spec can give "
                f"whole ({', '.join(WHOLE_SOURCE_KINDS)})"
            )
        object.__setattr__(self, "inline_sources", frozenset(self.inline_sources))

    @classmethod
    def development(cls) -> SpecPolicy:
        """Everything allowed: the starter of a session is trusted as the worker's owner."""
        flags = {f.name: True for f in fields(cls) if f.name != "inline_sources"}
        return cls(inline_sources=frozenset(WHOLE_SOURCE_KINDS), **flags)

    def gives_whole(self, kind: str) -> bool:
        """Whether a spec may give a source of ``kind`` whole."""
        return kind in self.inline_sources

    def allowed(self) -> list[str]:
        """What this policy lets a spec carry."""
        allowed = []
        for f in fields(self):
            if f.name == "inline_sources":
                allowed += [f"inline_{kind}" for kind in sorted(self.inline_sources)]
            elif getattr(self, f.name):
                allowed.append(f.name)
        return allowed

    def warning(self) -> str | None:
        """What a worker says loudly at start when it trusts specs with anything."""
        allowed = self.allowed()
        if not allowed:
            return None
        return (
            "WARNING: this worker lets session specs carry "
            + ", ".join(a.replace("_", " ") for a in allowed)
            + ". Whoever can start a session can then use this machine as its owner "
            "does. Use it for local development only."
        )


@dataclass(frozen=True)
class FileLimits:
    """How much a worker fetches for files that messages give by URL (``file_origins``),
    per model request: a message chooses its files, the worker's owner how many and how
    large. The limits count what a request costs, not only the files it sends. A file
    past a limit is left out of the request, and the model reads why."""

    max_files: int = 10
    """File parts by URL one request considers, newest first: each counts, whether it is
    sent, refused or served from memory (the same URL twice is two)."""
    max_bytes: int = 32 * 1024 * 1024
    """Their bytes in all, before base64, those read from a file then refused included
    (OpenAI takes at most 32 MB of files a request)."""
    max_file_bytes: int = 20 * 1024 * 1024
    """One file's bytes."""
    fetch_seconds: float = 30.0
    """All of one request's fetches together, from the first connection to the last
    byte."""
    cache_bytes: int = 64 * 1024 * 1024
    """Files kept between a session's calls on this worker (each session has its own,
    and a session that reuses a workflow id starts with none)."""
    cache_seconds: float = 600.0
    """How long a kept file may be used (each use asks its origin first whether it
    changed, with its ``ETag`` or ``Last-Modified``), and a refused file is left out
    of the session's requests without being asked for again."""

    def __post_init__(self) -> None:
        for name in ("max_files", "max_bytes", "max_file_bytes", "cache_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"file_limits.{name} cannot be negative")
        if self.fetch_seconds <= 0 or self.cache_seconds < 0:
            raise ValueError("file_limits: fetch_seconds must be positive, cache_seconds >= 0")


@dataclass(frozen=True)
class EndpointRules:
    """What the requests to one registered endpoint may carry beyond what the worker
    builds. A session's messages and spec choose these values; the worker's owner
    chooses which of them reach the provider, and each is off by default. In
    ``Capabilities(endpoint_rules=...)`` an entry is this or a mapping of the same
    settings (``{"request_options": ["user"]}``), as the worker's file writes it."""

    request_options: Collection[str] = ()
    """Keys of a spec's ``model.options.extra`` sent as they are (``logprobs``,
    ``parallel_tool_calls``, ``user``, an embeddings model's ``dimensions``). A key the
    wire API's request is built from (``model``, ``messages``, ``tools``, ``stream``,
    an output limit, a cache key) is never one: no setting lets a spec replace it. (An
    endpoint a spec gives itself, where ``SpecPolicy.inline_endpoints`` allows that,
    takes any other key: the starter chose where the request goes.)"""
    file_ids: Collection[str] = ()
    """The provider's file ids a message may name (an image or a file uploaded to the
    provider): only these, so one user cannot name another's upload. Any other is left
    out of the request, and the model reads that it was."""
    only_file_origins: bool | None = None
    """Whether an image or file a message gives by URL reaches the model server only
    when ``file_origins`` allows that URL. ``False``: any URL whose host is on a public
    address goes too (a hosted provider fetches it from the internet). Unset: on when
    the endpoint's base URL is on a loopback, private or link-local address, where the
    server (vLLM, llama.cpp) fetches from inside the owner's network."""
    hosted_tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """The provider's own tools a session may ask for, by their type on the wire
    (``web_search``; ``web_search_20250305`` on Anthropic), each with the settings sent
    with it (``{"filters": {"allowed_domains": ["example.com"]}}``; ``{}``: none): a
    spec's options may narrow these, never widen them. The provider runs these tools
    and bills them; what they fetch or run is the provider's, on the owner's account."""

    def __post_init__(self) -> None:
        for name in ("request_options", "file_ids"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ValueError(f"endpoint rules: {name} is a list of names, not one string")
            object.__setattr__(self, name, frozenset(value))
        object.__setattr__(self, "hosted_tools", dict(self.hosted_tools))


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


def _rules(name: str, given: EndpointRules | Mapping[str, Any]) -> EndpointRules:
    if isinstance(given, EndpointRules):
        return given
    known = [f.name for f in fields(EndpointRules)]
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(
            f"endpoint_rules {name!r}: no setting {unknown[0]!r} (settings: {', '.join(known)})"
        )
    return EndpointRules(**given)


def default_models() -> dict[str, ProviderEndpoint]:
    """With nothing registered: OpenAI, or the OpenAI-compatible server the worker's
    own ``OPENAI_BASE_URL`` names (the worker's environment is its owner's)."""
    model = model_from_environment()
    return {
        "openai": model.endpoint
        if model and not isinstance(model.endpoint, str)
        else ProviderEndpoint()
    }


def _listing(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def _same_endpoint(a: ProviderEndpoint, b: ProviderEndpoint) -> bool:
    """Where the request goes and which key it carries: what makes two endpoints one."""
    return (a.api, a.base_url, a.api_key_env, a.headers) == (
        b.api,
        b.base_url,
        b.api_key_env,
        b.headers,
    )


@dataclass
class Capabilities:
    """The worker's registries and its policy for anything else a spec carries."""

    models: Mapping[str, ProviderEndpoint] = field(default_factory=default_models)
    toolsets: Iterable[McpServerSpec | OpenApiSpec] = ()
    """Tool sources the worker's owner registers whole (an MCP server with its command or
    URL, an OpenAPI service with its document): a spec names one by kind and name."""
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
    every_model: ProviderEndpoint | None = None
    """Where every model call goes, whatever endpoint the spec names or carries: a
    development or test model (``durable_agent.testing.TestModel``; ``durable-agent
    worker --model test``). Unset: each call goes where its spec says."""
    file_origins: Collection[str] = ()
    """Where the worker may fetch a file a message gives by URL, for a model whose wire
    takes no file by URL (Chat Completions): origins such as
    ``https://files.example.com``, or an origin and a path (``https://host/public/``:
    that folder only, dot segments and escapes resolved first). The file is sent
    inline; one from anywhere else is never fetched, and the request says it was left
    out."""
    file_limits: FileLimits = field(default_factory=FileLimits)
    """How many files, and how many bytes, one request fetches (``FileLimits``)."""
    wake_ups: WakeUpLimits | Mapping[str, int] | None = field(default_factory=WakeUpLimits)
    """How far the wake-ups of sessions whose spec enables them may go:
    ``max_per_session`` (20), ``min_interval_seconds`` (60), ``max_ahead_days`` (366),
    as in ``{"max_per_session": 5}``. ``None``: this worker offers none, and a spec
    naming the ``wake_ups`` toolset fails to start."""
    endpoint_rules: Mapping[str, EndpointRules | Mapping[str, Any]] = field(default_factory=dict)
    """What requests to a registered endpoint may carry besides what the worker builds,
    by endpoint name: ``request_options`` (the keys of a spec's ``model.options.extra``
    sent), ``file_ids`` (the provider file ids a message may name), ``hosted_tools``
    (the provider's own tools a session may ask for) and ``only_file_origins``
    (whether the model server is handed only URLs ``file_origins`` allows), as in
    ``{"openai": {"request_options": ["user"]}}``. An endpoint without an entry takes
    no option, no file id and no hosted tool."""

    def __post_init__(self) -> None:
        self.toolsets = tuple(self.toolsets)  # read more than once (with_agents)
        self._sources: dict[tuple[str, str], McpServerSpec | OpenApiSpec] = {}
        for source in self.toolsets:
            source.check_registrable()
            self._sources[(source.kind, source.name)] = source
        for url in self.file_origins:
            url_host(url)  # (an http(s) URL with a host, or a sentence saying why not)
        self._file_origins = [
            (origin(url), normalised_path(urlsplit(url).path)) for url in self.file_origins
        ]
        if self.wake_ups is not None and not isinstance(self.wake_ups, WakeUpLimits):
            unknown = sorted(set(self.wake_ups) - set(WakeUpLimits.__dataclass_fields__))
            if unknown:
                raise ValueError(
                    f"wake_ups: no bound {unknown[0]!r} (bounds: max_per_session, "
                    "min_interval_seconds, max_ahead_days)"
                )
            self.wake_ups = WakeUpLimits(**self.wake_ups)
        self._rules = {name: _rules(name, r) for name, r in self.endpoint_rules.items()}
        for name in self._rules:
            if name not in self.models:
                raise ValueError(
                    f"endpoint_rules {name!r}: no registered model endpoint {name!r} "
                    f"(registered: {_listing(self.models)})"
                )
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
        worker registered or the policy allows (its URL checked); ``every_model`` when
        the worker answers every call with one model."""
        if self.every_model is not None:
            return self.every_model
        if isinstance(ref, str):
            found = self.models.get(ref)
            if found is None:
                raise NotRegistered(
                    f"model endpoint {ref!r} is not registered on this worker "
                    f"(registered: {_listing(self.models)})"
                )
            return found
        # whose compaction runs is the owner's choice alone: an inline copy takes the
        # registered endpoint's, and an endpoint a spec gives itself gets none
        copies = [known for known in self.models.values() if _same_endpoint(ref, known)]
        if copies:
            return ref.model_copy(update={"compaction": copies[0].compaction})
        ref = ref.model_copy(update={"compaction": None})
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
        names = (
            [endpoint]
            if isinstance(endpoint, str)
            else [name for name, known in self.models.items() if _same_endpoint(endpoint, known)]
        )
        for name in names:
            for key in (f"{name}/{model}", name):
                if key in self.limits:
                    return key, self.limits[key]
        return None

    def rules_for(self, endpoint: ProviderEndpoint | str) -> EndpointRules:
        """The owner's rules for requests to ``endpoint``: a registered name's own; for
        an inline endpoint, what the registered ones it is a copy of allow together
        (the first one's ``only_file_origins``); none (``EndpointRules()``) otherwise."""
        if isinstance(endpoint, str):
            return self._rules.get(endpoint, EndpointRules())
        copies = [
            self._rules[name]
            for name, known in self.models.items()
            if _same_endpoint(endpoint, known) and name in self._rules
        ]
        if len(copies) < 2:
            return copies[0] if copies else EndpointRules()
        return EndpointRules(
            request_options=frozenset().union(*(r.request_options for r in copies)),
            file_ids=frozenset().union(*(r.file_ids for r in copies)),
            only_file_origins=copies[0].only_file_origins,
            hosted_tools=copies[0].hosted_tools,
        )

    def hosted_tools_for(
        self, endpoint: ProviderEndpoint | str, options: ModelOptions, offered: HostedCatalogue
    ) -> tuple[ModelOptions, list[str]]:
        """``options`` with its hosted tools as they are sent to ``endpoint`` (the
        owner's settings, a spec's options over them), and what is wrong with those it
        asks for: a tool the owner does not allow there, one its wire (which has
        ``offered``) does not have, an option past the owner's."""
        allowed = self.rules_for(endpoint).hosted_tools
        if self._own_endpoint(endpoint):  # the starter chose where requests go (below)
            allowed = {tool: {} for tool in offered}
        name = endpoint if isinstance(endpoint, str) else "NAME"
        sent: list[HostedTool] = []
        problems: list[str] = []
        for tool in options.hosted_tools or ():
            if tool.name not in offered:
                problems.append(
                    f"hosted_tools[{tool.name!r}]: this endpoint's wire API has no hosted "
                    f"tool {tool.name!r} (it has: {_listing(offered)}); name one of them, "
                    "or a model on an endpoint whose API has it"
                )
            elif tool.name not in allowed:
                problems.append(
                    f"hosted_tools[{tool.name!r}]: this worker does not let sessions use "
                    f"{tool.name!r} on this endpoint; remove it, or its owner adds it to "
                    f"hosted_tools in endpoint_rules[{name!r}] (allowed now: "
                    f"{_listing(allowed)})"
                )
            else:
                fields, wrong = hosted_as_sent(
                    tool.name, tool.options, allowed[tool.name], offered[tool.name]
                )
                problems += wrong
                sent.append(HostedTool(name=tool.name, options=fields))
        if not options.hosted_tools:
            return options, problems
        return options.model_copy(update={"hosted_tools": sent}), problems

    def option_problems(
        self, endpoint: ProviderEndpoint | str, extra: Iterable[str], built: Collection[str]
    ) -> list[str]:
        """What is wrong with the ``model.options.extra`` keys a spec gives for a model on
        ``endpoint``, whose wire API builds the keys ``built`` itself (empty: nothing)."""
        problems = []
        allowed = self.rules_for(endpoint).request_options
        name = endpoint if isinstance(endpoint, str) else "NAME"
        own = self._own_endpoint(endpoint)
        for key in sorted(extra):
            if key in built:
                problems.append(
                    f"extra[{key!r}]: the worker builds {key!r} itself for this endpoint's "
                    "wire API, and no setting lets a spec replace it; remove it (the "
                    "model's name, its options and its tools have fields of their own)"
                )
            elif key not in allowed and not own:
                problems.append(
                    f"extra[{key!r}]: this worker does not send {key!r} to this endpoint; "
                    f"remove it, or its owner adds it to request_options in "
                    f"endpoint_rules[{name!r}] (allowed now: {_listing(allowed)})"
                )
        return problems

    def _own_endpoint(self, endpoint: ProviderEndpoint | str) -> bool:
        # an endpoint the spec gave itself (a policy for local development): the starter
        # chose where the request goes, so the options sent there are the starter's too
        return (
            not isinstance(endpoint, str)
            and self.policy.inline_endpoints
            and not any(_same_endpoint(endpoint, k) for k in self.models.values())
        )

    # -- tool sources

    def registered(self, kind: str, name: str) -> McpServerSpec | OpenApiSpec | None:
        """The source of ``kind`` the worker's owner registered as ``name``."""
        return self._sources.get((kind, name))

    def registered_names(self, kind: str) -> str:
        """The names of the registered sources of ``kind``, for error messages."""
        return _listing(name for known, name in self._sources if known == kind)

    def narrowed_source(self, entry: Registrable, what: str) -> Registrable:
        """The source registered under the entry's kind and name, with what the entry may
        choose (fewer tools, another prefix, a stricter approval); ``NotRegistered`` or
        ``NotAllowed`` otherwise. ``what`` names the kind in errors ("MCP server")."""
        registered = self.registered(entry.kind, entry.name)
        if not isinstance(registered, type(entry)):
            raise NotRegistered(
                f"{what} {entry.name!r} is not registered on this worker "
                f"(registered: {self.registered_names(entry.kind)})"
            )
        try:
            return narrowed(registered, entry)
        except ValueError as error:
            raise NotAllowed(str(error)) from None

    def owner_gates(self, entry: McpServerSpec | OpenApiSpec) -> OwnerGates | None:
        """How the worker's owner gates the tools of a source it registered (``None``:
        a source the spec gave whole, where the policy allows that)."""
        if entry.given_whole():
            return None
        registered = self.registered(entry.kind, entry.name)
        if registered is None:
            return None
        return OwnerGates.of(ToolPolicy(approval=registered.approval))

    def floored(
        self, entry: McpServerSpec | OpenApiSpec, tools: list[ResolvedTool]
    ) -> list[ResolvedTool]:
        """A source's tools with its owner's floor on each (as listed, without one)."""
        floor = self.owner_gates(entry)
        return tools if floor is None else [t.model_copy(update={"floor": floor}) for t in tools]

    def file_fetchable(self, url: str) -> str | None:
        """The URL to fetch for a file a message gives at ``url``, when an entry of
        ``file_origins`` allows it (its origin, and its path prefix if it has one);
        ``None`` otherwise. What is fetched is the path as checked (escapes and dot
        segments resolved), without user info, so the server reads what was allowed."""
        try:
            url_host(url)  # an http(s) URL with a host
            parts = urlsplit(url)
            where, path = origin(url), normalised_path(parts.path)
        except (UrlRefused, ValueError):  # (a port that is not a number: ValueError)
            return None
        if not any(where == o and under(path, prefix) for o, prefix in self._file_origins):
            return None
        return rebuilt(parts.scheme, parts.hostname or "", parts.port, path, parts.query)

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
