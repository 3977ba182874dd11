"""Model providers over HTTP (httpx): one request, streamed or whole, in the wire format
the endpoint speaks, and the endpoint the environment describes."""

from __future__ import annotations

from ._client import (
    ProviderClient,
    ProviderConfigurationError,
    ProviderError,
    ResponseFacts,
    shared_client,
)
from ._environment import model_from_environment

__all__ = [
    "ProviderClient",
    "ProviderConfigurationError",
    "ProviderError",
    "ResponseFacts",
    "model_from_environment",
    "shared_client",
]
