"""A research agent with an MCP server and a typed report: it asks the reference MCP
time server (``pip install mcp-server-time``) what time it is in a few cities and answers
with a ``TimeReport``.

    OPENAI_API_KEY=... python -m examples.time_report
"""

from __future__ import annotations

import asyncio
import sys

from pydantic import BaseModel

from durable_agent import Agent, AgentClient, McpServerSpec, ModelSpec

#: The reference MCP server, started over stdio by the worker for each session: the
#: worker that has this agent registers it; the session names it.
CLOCK = McpServerSpec(
    name="clock",
    command=sys.executable,
    args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
    allowed_tools=["get_current_time"],
)


class CityTime(BaseModel):
    city: str
    timezone: str
    local_time: str


class TimeReport(BaseModel):
    cities: list[CityTime]
    summary: str


def researcher(model: ModelSpec) -> Agent[TimeReport]:
    return Agent(
        name="researcher",
        model=model,
        instructions=(
            "Find the current local time in each city the user names with the clock tools "
            "(IANA time zones), then report them."
        ),
        output_type=TimeReport,
        mcp_servers=[CLOCK],
    )


async def main() -> None:
    from examples._running import model_or_exit, running

    agent = researcher(model_or_exit())
    async with running("research", agents=[agent]) as client:
        run = await AgentClient(client, task_queue="research").run(
            agent, "What time is it in Oslo and in Tokyo?"
        )
    for city in run.output.cities:
        print(f"{city.city}: {city.local_time} ({city.timezone})")
    print(run.output.summary)


if __name__ == "__main__":
    asyncio.run(main())
