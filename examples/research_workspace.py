"""A research agent that drafts a report in its workspace, with the built-in model (no
key, no network): it writes a plan (``write_todos``), a draft file, edits it, and reads
it back to answer. The files live in the workspace, outside the conversation: the
messages hold the tool calls and their short results.

    python -m examples.research_workspace
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from tempfile import mkdtemp
from typing import Any

from durable_agent import Agent, AgentClient, AssistantMessage, ModelSpec, Registry
from durable_agent.capabilities import Workspace, WorkspaceLimits
from durable_agent.testing import FunctionModel, ModelRequest, assistant_calls, assistant_text

DRAFT = "# Durable agents\n\nTODO: findings\n"
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("workspace_write_todos", {"todos": [{"content": "draft the report", "status": "pending"}]}),
    ("workspace_write_file", {"path": "/report.md", "content": DRAFT}),
    (
        "workspace_edit_file",
        {
            "path": "/report.md",
            "old_string": "TODO: findings",
            "new_string": "Sessions survive crashes; memory outlives them.",
        },
    ),
    ("workspace_read_file", {"path": "/report.md"}),
]


def research_model(request: ModelRequest) -> AssistantMessage:
    """One step of the plan a call, then an answer from the file it read back."""
    done = [m for m in request.since_last_user() if m.role == "tool"]
    if len(done) < len(STEPS):
        return assistant_calls(STEPS[len(done)])
    return assistant_text("Report drafted:\n" + str(done[-1].content))


async def main() -> str:
    from examples._running import running

    workspace = Workspace(
        f"sqlite:///{Path(mkdtemp()) / 'memory.sqlite'}",
        {"workspace": "session/{session}"},
        limits=WorkspaceLimits(max_file_bytes=100_000, max_files=50),
    )
    with FunctionModel(research_model) as model:
        agent: Agent[str] = Agent(
            name="researcher",
            model=ModelSpec(name="research-model", endpoint=model.endpoint),
            settings={"toolsets": [{"kind": "workspace", "name": "workspace"}]},
        )
        registry = Registry([workspace])
        async with running("research-workspace", agents=[agent], registry=registry) as temporal:
            client = AgentClient(temporal, task_queue="research-workspace")
            run = await client.run(agent, "Draft a short report on durable agents.")
    print(run.output)
    return str(run.output)


if __name__ == "__main__":
    asyncio.run(main())
