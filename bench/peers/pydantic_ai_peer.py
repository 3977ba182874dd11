"""The benchmark's workload on Pydantic AI's Temporal integration, as its documentation
has it: an agent with the ``TemporalDurability`` capability run from a workflow, each
model request and each tool call an activity. Runs in the peers' environment
(bench/.peers-venv), not ours.

    python pydantic_ai_peer.py ADDRESS TASK_QUEUE BASE_URL
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent, UsageLimits
    from pydantic_ai.durable_exec.temporal import (
        AgentPlugin,
        PydanticAIPlugin,
        TemporalDurability,
    )
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from bench.peers.peer_address import BASE_URL


def lookup(key: int) -> str:
    """Look a key up."""
    return f"value {key}"


def read_kb(key: int) -> str:
    """Read one kilobyte."""
    return (f"record {key} " * 100)[:1024]


def agent(model: str, tool: Any) -> Agent[None, str]:
    chat = OpenAIChatModel(model, provider=OpenAIProvider(base_url=BASE_URL, api_key="unused"))
    return Agent(chat, name=model, tools=[tool], capabilities=[TemporalDurability()])


AGENTS = {"bench-a": agent("bench-a", lookup), "bench-b": agent("bench-b", read_kb)}


@workflow.defn(name="PydanticAIBench")
class PydanticAIBench:
    @workflow.run
    async def run(self, request: dict[str, Any]) -> str:
        limits = UsageLimits(request_limit=request["max_turns"])  # its default is 50
        result = await AGENTS[request["model"]].run(request["prompt"], usage_limits=limits)
        return result.output


async def main(address: str, task_queue: str) -> None:
    client = await Client.connect(address, plugins=[PydanticAIPlugin()])
    plugins = [AgentPlugin(a) for a in AGENTS.values()]
    async with Worker(client, task_queue=task_queue, workflows=[PydanticAIBench], plugins=plugins):
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
