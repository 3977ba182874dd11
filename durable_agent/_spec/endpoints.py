"""Where a model lives and how to reach it, and the limits its owner shares out across
workers: pure configuration, no HTTP client.

Workflow code (specs, activity inputs) imports this module, never
``durable_agent._providers``, so nothing under ``workflows/`` reaches httpx.
``ProviderLimits`` and the capacity messages (below) are what the owner says one endpoint
may take and what sessions and its limiter workflow say to each other.
"""

from __future__ import annotations

import hashlib
import json
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

from durable_agent._wire.messages import Contract, nulls_kept
from durable_agent._wire.options import ProviderCompaction


def _unset(value: object) -> bool:
    return value is None


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
    compaction: ProviderCompaction | None = Field(default=None, exclude_if=_unset)
    """Whose compaction runs for this endpoint (unset: the project's own alone).
    Only the owner's registration sets it: an inline copy of a registered endpoint
    takes the registered one's."""

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

    @property
    def account(self) -> str:
        """Whose replies these are: the base URL, and with a key or headers a digest of
        which (two keys at one address are two accounts). A reply's provider parts are
        marked with it, and no request of another account is ever sent them."""
        if self.api_key_env is None and not self.headers:
            return self.base_url
        which = json.dumps([self.api_key_env, sorted(self.headers.items())])
        return f"{self.base_url}#{hashlib.sha256(which.encode()).hexdigest()[:16]}"


# Shared provider limits: what a worker's owner says one model endpoint may take, and
# what sessions and the endpoint's limiter say to each other. Pure: the limiter workflow
# and the model activity both import it.
#
# A limit is the owner's, never a spec's: it is registered with the endpoint
# (``Capabilities.limits``, ``[limits.NAME]`` in the capabilities file) and holds for
# every worker process and session on the namespace, because one long-lived limiter
# workflow per endpoint keeps the count (``workflows/limiter.py``).

#: The limiter's workflow type (one workflow per limited endpoint, id ``limiter_id``).
LIMITER_WORKFLOW = "durable-agent-limiter"
#: The signal a limiter sends a session whose call waited: capacity is kept for it.
CAPACITY_READY_SIGNAL = "capacity_ready"


class ProviderLimits(BaseModel):
    """What one endpoint (or one model on it) may take, across all workers and sessions.
    Every field is optional; a request waits until all that are set have capacity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    """Counted per request as its estimated input plus its output cap, then corrected by
    the usage its reply reports."""
    concurrent_requests: int | None = Field(default=None, ge=1)
    window_seconds: float = Field(default=60.0, gt=0)
    """The "minute" the per-minute figures count over (shorter only to test or measure)."""
    margin_seconds: float = Field(default=1.0, ge=0)
    """Grants are counted as if the window were this much longer: the time between a
    grant and its request reaching the provider, whose own window counts arrivals."""


def limiter_id(key: str, limits: ProviderLimits) -> str:
    """The workflow id of the limiter of ``key`` (an endpoint name, or ``NAME/MODEL``)
    under ``limits``. The id names the limits by their digest: anyone who can signal a
    workflow in the namespace can reach a limiter, so a limiter takes its limits only
    from its id (``limits_digest``), never from what an ask carries. An owner who changes
    the limits starts a new limiter; the old one's leases run out on their own."""
    return f"durable-agent-limiter:{key}@{limits_digest(limits)}"


def limits_digest(limits: ProviderLimits) -> str:
    canonical = json.dumps(limits.model_dump(mode="json"), sort_keys=True).encode()
    return hashlib.sha256(canonical).hexdigest()[:16]


class CapacityRequest(Contract):
    """A model call asking for capacity (the ``acquire`` update)."""

    limits: ProviderLimits
    """The asking worker's limits for the endpoint: a limiter refuses an ask whose limits
    are not the ones its id names."""
    session_id: str
    run_id: str
    tenant: str = ""
    """Whose call it is (the session's owner): capacity is shared fairly between them."""
    tokens: int = Field(default=0, ge=0)
    hold_seconds: float = Field(gt=0)
    """How long the call may take: a lease its worker never gives back ends then."""
    spare: bool = False
    """A worker's lease in advance, for its next call: granted only when nobody waits and
    there is capacity, never a place in line."""


class CapacityAnswer(Contract):
    lease: str | None = None
    """Granted: the lease to give back when the call is over."""
    wait_seconds: float = 0.0
    """Not granted: the call waits in line; the session hears ``capacity_ready`` when
    capacity is kept for it, and asks again after this long if it has heard nothing."""


class CapacityRelease(Contract):
    """A call is over (the ``release`` signal): its lease back, its tokens as billed."""

    lease: str
    tokens: int | None = None
    """What the reply's usage says it cost (``None``: keep the estimate)."""
    rate_limited: bool = False
    """The provider answered 429: the endpoint slows down for everyone."""
    retry_after: float | None = None
    unused: bool = False
    """A spare lease its worker did not use in time: it never counted."""


class CapacityReady(Contract):
    """Capacity is kept for the session's waiting call on this endpoint."""

    key: str
