"""A worker's registries in a file (TOML or JSON), for workers started from the CLI.

    task_queues = ["gpu-tools"]
    file_origins = ["https://files.example.com/reports/"]   # files by URL, for Chat Completions
    file_limits = {max_files = 10, max_bytes = 33554432}   # per request (FileLimits)

    [models.openai]
    base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"

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

The file is the worker owner's: what it names is trusted. A mistake in it stops the
worker at start with the field named, never a session later.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from durable_agent._errors import DurableAgentError
from durable_agent._spec._endpoint import ProviderEndpoint
from durable_agent._spec._provider_limits import ProviderLimits
from durable_agent._spec._spec import McpServerSpec, ModelPrice, OpenApiSpec

from ._policy import SpecPolicy
from ._registry import Capabilities, FileLimits, SecretGrant, default_models


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
        parsed = _File.model_validate(raw)
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
        )
    except ValidationError as error:
        raise CapabilitiesFileError(f"{path}: {_first(error)}") from None
    except ValueError as error:
        raise CapabilitiesFileError(f"{path}: {error}") from None


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
