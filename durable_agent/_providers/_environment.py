"""A model endpoint from the usual environment variables, for the demo and the CLI."""

from __future__ import annotations

import os
from collections.abc import Mapping

from durable_agent._spec._endpoint import ProviderEndpoint
from durable_agent._spec._spec import ModelSpec

DEFAULT_MODEL = "gpt-4o-mini"


def model_from_environment(environ: Mapping[str, str] | None = None) -> ModelSpec | None:
    """OpenAI (``OPENAI_API_KEY``) or any OpenAI-compatible server (``OPENAI_BASE_URL``,
    key optional); the model id from ``DURABLE_AGENT_MODEL``. ``None`` when neither is set."""
    env = os.environ if environ is None else environ
    key, base_url = env.get("OPENAI_API_KEY"), env.get("OPENAI_BASE_URL")
    if not key and not base_url:
        return None
    endpoint = ProviderEndpoint(
        base_url=base_url or "https://api.openai.com/v1",
        api_key_env="OPENAI_API_KEY" if key else None,
    )
    return ModelSpec(name=env.get("DURABLE_AGENT_MODEL", DEFAULT_MODEL), endpoint=endpoint)
