"""Tools a separately started worker loads with ``--tools tests.support.cli_tools``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from durable_agent._providers import embed, generate_image, shared_client
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.functions import tool
from durable_agent._tools.hooks import HookContext, round_hook
from durable_agent._wire.messages import AssistantMessage


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    return {"NYC": "09:00", "Tokyo": "22:00"}.get(city, "unknown")


@tool(approval="always")
def wipe_cache(name: str) -> str:
    """Clear a cache (a person approves)."""
    ran = os.environ.get("CLI_TOOLS_WIPED")
    if ran:  # a test that kills workers reads which calls ran from this file
        with open(ran, "a") as log:
            log.write(name + "\n")
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


@round_hook(on="reply")
async def hold_while_flagged(reply: AssistantMessage, context: HookContext) -> None:
    """A barrier for the billing test: with ``$DA_TEST_HOLD_FIFO`` set, the reply waits
    here (after the provider answered) until someone writes to that named pipe, and a
    ``.reached`` file beside it says it got here; a worker without the variable passes."""
    fifo = os.environ.get("DA_TEST_HOLD_FIFO")
    if fifo:
        Path(fifo + ".reached").touch()
        await asyncio.to_thread(Path(fifo).read_bytes)  # blocks until a writer comes
