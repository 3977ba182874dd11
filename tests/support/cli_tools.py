"""Tools a separately started worker loads with ``--tools tests.support.cli_tools``."""

from __future__ import annotations

from durable_agent.endpoint import ProviderEndpoint
from durable_agent.provider import embed, generate_image, shared_client
from durable_agent.tools import tool


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    return {"NYC": "09:00", "Tokyo": "22:00"}.get(city, "unknown")


@tool(approval="always")
def wipe_cache(name: str) -> str:
    """Clear a cache (a person approves)."""
    return f"cache {name} cleared"


@tool
async def embed_note(text: str, base_url: str) -> str:
    """How many dimensions an embeddings model gives a note (it calls the model)."""
    endpoint = ProviderEndpoint(base_url=base_url, api_key_env=None)
    vectors = await embed(shared_client(), endpoint, "text-embedding-3-small", [text])
    return f"{len(vectors[0])} dimensions"


@tool
async def draw(prompt: str, base_url: str) -> str:
    """The address of an image an image model drew (it calls the model)."""
    endpoint = ProviderEndpoint(base_url=base_url, api_key_env=None)
    [image] = await generate_image(shared_client(), endpoint, "gpt-image-1", prompt)
    return image.url or "no url"
