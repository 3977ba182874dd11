"""A worker's registries in a file (TOML or JSON), for workers started from the CLI.

    task_queues = ["gpu-tools"]
    file_origins = ["https://files.example.com/reports/"]   # files by URL, for Chat Completions
    file_limits = {max_files = 10, max_bytes = 33554432}   # per request (FileLimits)
    wake_ups = {max_per_session = 20, min_interval_seconds = 60}   # or false: none

    [models.openai]
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"

    [models.responses]
    api = "responses"
    compaction = {strategy = "provider", threshold_tokens = 150000}   # whose compaction runs

    [models.local]    # a server that takes no key: api_key_env = "" (JSON: "" or null)
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = ""

    [mcp_servers.time]
    command = "uvx"
    args = ["mcp-server-time"]

    [openapi.billing]
    document = "https://billing.internal/openapi.json"
    headers = { Authorization = "BILLING_TOKEN" }

    [secrets.GITHUB_TOKEN]
    tools = ["create_issue"]
    parameters = ["token"]

    [policy]          # all off unless set: see SpecPolicy
    inline_endpoints = false
    inline_sources = []   # kinds a spec may give whole: "mcp", "openapi"

    [prices."gpt-4o"] # US dollars per million tokens, for specs that give none
    input_per_million = 2.5
    output_per_million = 10

    [limits.openai]   # shared by every worker and session (or "openai/gpt-4o": one model)
    requests_per_minute = 500
    tokens_per_minute = 200000
    concurrent_requests = 50

    [endpoint_rules.openai]   # what its requests may carry; none by default
    request_options = ["parallel_tool_calls", "logprobs"]   # keys of model.options.extra
    file_ids = ["file-abc123"]         # provider file ids a message may name
    only_file_origins = false          # image URLs on public hosts go to the provider too
    hosted_tools = { web_search = { filters = { allowed_domains = ["example.com"] } } }

The file is the worker owner's: what it names is trusted. A mistake in it stops the
worker at start with the field named, never a session later.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from durable_agent._errors import DurableAgentError
from durable_agent._spec.document import McpServerSpec, ModelPrice, OpenApiSpec
from durable_agent._spec.endpoints import ProviderEndpoint, ProviderLimits

from ._registry import Capabilities, FileLimits, SecretGrant, SpecPolicy, default_models


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Secret(_Strict):
    tools: list[str] = Field(min_length=1)
    parameters: list[str] | None = None
    variable: str | None = None


class _Policy(_Strict):
    inline_endpoints: bool = False
    inline_sources: list[str] = Field(default_factory=list)
    worker_files: bool = False
    private_network: bool = False
    any_secret: bool = False
    any_task_queue: bool = False
    # the names files written before ``inline_sources`` use, read as it
    inline_mcp: bool = False
    inline_openapi: bool = False
    file_documents: bool = False

    def policy(self) -> SpecPolicy:
        kinds = set(self.inline_sources)
        kinds |= {"mcp"} if self.inline_mcp else set()
        kinds |= {"openapi"} if self.inline_openapi else set()
        return SpecPolicy(
            inline_endpoints=self.inline_endpoints,
            inline_sources=frozenset(kinds),
            worker_files=self.worker_files or self.file_documents,
            private_network=self.private_network,
            any_secret=self.any_secret,
            any_task_queue=self.any_task_queue,
        )


class _Rules(_Strict):
    request_options: list[str] = Field(default_factory=list)
    file_ids: list[str] = Field(default_factory=list)
    only_file_origins: bool | None = None
    hosted_tools: dict[str, dict[str, Any]] = Field(default_factory=dict)


class _File(_Strict):
    models: dict[str, ProviderEndpoint] | None = None
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    openapi: dict[str, dict[str, Any]] = Field(default_factory=dict)
    secrets: dict[str, _Secret] = Field(default_factory=dict)
    task_queues: list[str] = Field(default_factory=list)
    policy: _Policy = Field(default_factory=_Policy)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    limits: dict[str, ProviderLimits] = Field(default_factory=dict)
    file_origins: list[str] = Field(default_factory=list)
    file_limits: dict[str, float] = Field(default_factory=dict)
    wake_ups: dict[str, int] | Literal[False] = Field(default_factory=dict)
    endpoint_rules: dict[str, _Rules] = Field(default_factory=dict)


class CapabilitiesFileError(DurableAgentError, ValueError):
    """The file cannot be read or does not describe registries; says where."""


def load_capabilities(path: Path) -> Capabilities:
    """The registries ``path`` describes (``models`` left out: the default ones)."""
    try:
        text = path.read_text()
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as error:
        raise CapabilitiesFileError(f"{path}: {error}") from None
    try:
        parsed = _File.model_validate(_keys_named(raw))
        servers = [
            _entry(McpServerSpec, "mcp_servers", k, v) for k, v in parsed.mcp_servers.items()
        ]
        apis = [_entry(OpenApiSpec, "openapi", k, v) for k, v in parsed.openapi.items()]
        return Capabilities(
            models=default_models() if parsed.models is None else parsed.models,
            toolsets=[*servers, *apis],
            secrets={
                name: SecretGrant(tools=s.tools, parameters=s.parameters, variable=s.variable)
                for name, s in parsed.secrets.items()
            },
            task_queues=parsed.task_queues,
            policy=parsed.policy.policy(),
            prices=parsed.prices,
            limits=parsed.limits,
            file_origins=parsed.file_origins,
            file_limits=_file_limits(parsed.file_limits),
            wake_ups=parsed.wake_ups or (None if parsed.wake_ups is False else {}),
            endpoint_rules={
                name: rules.model_dump() for name, rules in parsed.endpoint_rules.items()
            },
        )
    except ValidationError as error:
        raise CapabilitiesFileError(f"{path}: {_first(error)}") from None
    except ValueError as error:
        raise CapabilitiesFileError(f"{path}: {error}") from None


#: What people write for "no key" that would instead name a variable (or nothing valid).
_NOT_A_NO_KEY = {"none", "null", "nil", "no", "false", "-"}


def _keys_named(raw: Any) -> Any:
    """The file with each endpoint's ``api_key_env = ""`` read as no key (TOML has no
    null); other spellings of "no key", and a key in the file, refused with the right
    spelling."""
    models = raw.get("models") if isinstance(raw, dict) else None
    if not isinstance(models, dict):
        return raw
    read = {}
    for name, table in models.items():
        if isinstance(table, dict):
            _check_key(name, table)
            if table.get("api_key_env") == "":
                table = {**table, "api_key_env": None}
        read[name] = table
    return {**raw, "models": read}


def _check_key(name: str, table: dict[str, Any]) -> None:
    no_key = 'for an endpoint that takes no key, write api_key_env = ""'
    for field in ("api_key", "key", "keyless", "no_key"):
        if field in table:
            raise ValueError(
                f"models.{name}.{field}: an endpoint names the variable that holds its key, "
                f'never the key: api_key_env = "VARIABLE"; {no_key}'
            )
    given = table.get("api_key_env")
    if isinstance(given, bool) or (
        isinstance(given, str) and given.strip().lower() in _NOT_A_NO_KEY
    ):
        raise ValueError(
            f"models.{name}.api_key_env: {given!r} would be read as the name of a variable; "
            f"{no_key}"
        )


def _file_limits(given: dict[str, float]) -> FileLimits:
    known = {f.name: f.type for f in fields(FileLimits)}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"file_limits: no setting {unknown[0]!r} (settings: {', '.join(known)})")
    counts = {k: int(v) if known[k] == "int" else float(v) for k, v in given.items()}
    return FileLimits(**counts)  # type: ignore[arg-type]


_Model = TypeVar("_Model", McpServerSpec, OpenApiSpec)


def _entry(kind: type[_Model], table: str, name: str, value: dict[str, Any]) -> _Model:
    try:
        return kind.model_validate({**value, "name": name})
    except ValidationError as error:
        raise ValueError(f"{table}.{name}.{_first(error)}") from None


def _first(error: ValidationError) -> str:
    """The first problem as ``field.path: what is wrong``."""
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{where}: {first['msg']}" if where else first["msg"]
