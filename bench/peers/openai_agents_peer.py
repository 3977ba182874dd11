"""The benchmark's workload on the OpenAI Agents SDK with Temporal's plugin, as its
documentation has it: the agent loop in a workflow, each model call and each tool an
activity. Runs in the peers' environment (bench/.peers-venv), not ours.

    python openai_agents_peer.py ADDRESS TASK_QUEUE BASE_URL
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # nothing leaves the machine

from agents import Agent, Runner, set_tracing_disabled
from agents.models.openai_provider import OpenAIProvider
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
from temporalio.openai_agents.workflow import activity_as_tool
from temporalio.worker import Worker


@activity.defn
async def lookup(key: int) -> str:
    """Look a key up."""
    return f"value {key}"


@activity.defn
async def read_kb(key: int) -> str:
    """Read one kilobyte."""
    return (f"record {key} " * 100)[:1024]


TOOLS = {"lookup": lookup, "read_kb": read_kb}


@workflow.defn(name="OpenAIAgentsBench")
class OpenAIAgentsBench:
    @workflow.run
    async def run(self, request: dict[str, Any]) -> str:
        tool = activity_as_tool(
            TOOLS[request["tool"]], start_to_close_timeout=timedelta(seconds=60)
        )
        agent: Agent[None] = Agent(name="bench", model=request["model"], tools=[tool])
        result = await Runner.run(agent, request["prompt"], max_turns=request["max_turns"])
        return str(result.final_output)


async def main(address: str, task_queue: str, base_url: str) -> None:
    set_tracing_disabled(True)
    provider = OpenAIProvider(base_url=base_url, api_key="unused", use_responses=False)
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60)),
        model_provider=provider,
    )
    client = await Client.connect(address, plugins=[plugin])
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[OpenAIAgentsBench],
        activities=list(TOOLS.values()),
    )
    async with worker:
        print("ready", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
