"""Where a model lives and how to reach it: pure configuration, no HTTP client.

Workflow code (specs, activity inputs) imports this module, never ``provider``,
so nothing under ``workflows/`` reaches httpx.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from durable_agent._wire._contract import nulls_kept


class ProviderEndpoint(BaseModel):
    """Where and how to reach a model; holds the *name* of the key's variable, never the key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    api: str = Field(default="chat", pattern=r"^[A-Za-z0-9_.-]+$")
    """The wire API, by name: ``chat`` (Chat Completions and compatible servers),
    ``responses``, ``anthropic``, or one the worker's ``Registry`` adds (the worker
    refuses a session whose endpoint names an API it does not speak)."""
    base_url: str = "https://api.openai.com/v1"
    """Base URL including the version segment; the API's path is appended."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """Environment variable holding the key; ``None`` sends no key (local servers)."""

    headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout: float = Field(default=10.0, gt=0)
    read_timeout: float = Field(default=120.0, gt=0)
    """Longest wait for the next bytes of a response (a stream may run longer in total)."""

    @model_serializer(mode="wrap")
    def _no_key_kept(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        return nulls_kept(self, handler(self), info, ("api_key_env",))

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {url!r}")
        return url.rstrip("/")

    @field_validator("headers")
    @classmethod
    def _no_secret_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        secret = {"authorization", "x-api-key", "api-key"} & {h.lower() for h in headers}
        if secret:
            raise ValueError(
                f"header {sorted(secret)[0]!r} would put a secret in the spec; "
                "name the environment variable in api_key_env instead"
            )
        return headers
