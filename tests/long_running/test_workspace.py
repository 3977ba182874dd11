"""A workspace per session: the file tools and the todo plan over the memory store,
bounded by the owner; paths that try to leave the tree are refused and write nothing;
on the real dev server a session reaches its files after continue-as-new, and its
message array holds the calls and results, never the files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.tools import ToolContext
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.capabilities import Workspace, WorkspaceLimits
from durable_agent.capabilities._memory import Scope
from durable_agent.capabilities._memory_store import PathRefused, normalised
from durable_agent.capabilities._workspace import WorkspaceTool
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.support.agent_harness import running_worker, spec_for

ALICE = Scope(user="token:alice", tenant="token:alice", session="s-1")


def workspace(folder: Path, limits: WorkspaceLimits | None = None) -> Workspace:
    return Workspace(f"sqlite:///{folder / 'memory.sqlite'}", limits=limits)


async def use(kind: Workspace, tool: str, slot: int, **arguments: object) -> tuple[str, bool]:
    context = ToolContext(
        session_id="s-1",
        turn=1,
        slot=slot,
        tool_call_id=f"c{slot}",
        idempotency_key=f"s-1:1:{slot}",
    )
    return await kind.serve(WorkspaceTool(source="workspace", tool=tool), arguments, context, ALICE)


def stored_paths(folder: Path) -> list[tuple[str, str]]:
    rows = sqlite3.connect(folder / "memory.sqlite").execute(
        "SELECT namespace, path_text FROM workspace_files ORDER BY path_text"
    )
    return rows.fetchall()


async def test_the_file_tools_and_the_plan(tmp_path: Path) -> None:
    kind = workspace(tmp_path)
    assert await use(kind, "write_file", 0, path="report/draft.md", content="# Draft\nintro\n") == (
        "Wrote /report/draft.md (14 bytes).",
        False,
    )
    await use(kind, "write_file", 1, path="/notes/a.md", content="sources: arxiv\n")
    edited = await use(
        kind,
        "edit_file",
        2,
        path="/report/draft.md",
        old_string="intro",
        new_string="Intro: memory",
    )
    assert edited == ("Wrote /report/draft.md (22 bytes).", False)
    assert (await use(kind, "read_file", 3, path="/report/./draft.md"))[
        0
    ] == "# Draft\nIntro: memory"
    assert (await use(kind, "ls", 4, path="/report"))[0] == "/report/draft.md (22 bytes)"
    assert (await use(kind, "glob", 5, pattern="/notes/*.md"))[0] == "/notes/a.md"
    assert (await use(kind, "grep", 6, pattern="arxiv"))[0] == "/notes/a.md:1: sources: arxiv"
    plan = [
        {"content": "outline", "status": "completed"},
        {"content": "write", "status": "pending"},
    ]
    assert await use(kind, "write_todos", 7, todos=plan) == ("Updated the plan.", False)
    assert json.loads((await use(kind, "read_file", 8, path="/todos.json"))[0]) == plan
    assert await use(kind, "delete", 9, path="/notes/a.md") == ("Deleted /notes/a.md.", False)
    assert [p for _, p in stored_paths(tmp_path)] == ["/report/draft.md", "/todos.json"]
    # the same call again (a retry) answers as before and writes nothing
    assert await use(kind, "delete", 9, path="/notes/a.md") == ("Deleted /notes/a.md.", False)


@pytest.mark.parametrize(
    "path",
    [
        "../etc/passwd",
        "/a/../../b",
        "..",
        "a\\..\\b",
        "a\x00b",
        "a\u202eb",
        "\uff0e\uff0e/x",
        "x" * 600,
    ],
)
async def test_a_path_that_leaves_the_tree_is_refused_and_writes_nothing(
    tmp_path: Path, path: str
) -> None:
    kind = workspace(tmp_path)
    text, is_error = await use(kind, "write_file", 0, path=path, content="x")
    assert is_error and text.startswith("write_file: ")
    assert stored_paths(tmp_path) == []
    with pytest.raises(PathRefused):
        normalised(path)


def test_absolute_and_dotted_paths_land_inside_the_tree() -> None:
    assert normalised("/etc/passwd") == "/etc/passwd"  # the workspace's own /etc, no disk
    assert normalised("a//b/./c/") == "/a/b/c"
    assert normalised("") == "/"
    assert normalised("a\u2215b") == "/a\u2215b"  # a division slash is a letter of one name


async def test_the_owners_bounds_refuse_with_a_sentence(tmp_path: Path) -> None:
    kind = workspace(tmp_path, WorkspaceLimits(max_file_bytes=10, max_bytes=15, max_files=2))
    assert await use(kind, "write_file", 0, path="big", content="x" * 11) == (
        "/big would be 11 bytes; a file holds at most 10",
        True,
    )
    await use(kind, "write_file", 1, path="a", content="x" * 10)
    assert await use(kind, "write_file", 2, path="b", content="x" * 6) == (
        "the workspace would hold 16 bytes; it holds at most 15",
        True,
    )
    await use(kind, "write_file", 3, path="b", content="x")
    assert await use(kind, "write_file", 4, path="c", content="") == (
        "the workspace holds 2 files already; delete one first",
        True,
    )
    assert [p for _, p in stored_paths(tmp_path)] == ["/a", "/b"]


async def test_a_session_reaches_its_files_after_continue_as_new(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    kind = workspace(tmp_path)
    draft = "# Findings\n" + "A long draft line.\n" * 50
    script = [
        assistant_calls(("workspace_write_file", {"path": "/report.md", "content": draft})),
        assistant_text("drafted"),
        *[assistant_text(f"answer {k}") for k in range(4)],
        assistant_calls(("workspace_read_file", {"path": "/report.md", "limit": 1})),
        assistant_text("read it"),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(
            provider,
            [],
            toolsets=[{"kind": "workspace", "name": "workspace"}],
            session={"continue_as_new_after_events": 20},
        )
        async with running_worker(temporal_env, task_queue, Registry([kind])):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            session = agents.session(
                await agents.start(spec, "draft a report", owner="token:alice")
            )
            await session.wait(timeout=60)
            for k in range(5):
                after = len(await session.messages())
                await session.send(f"go on {k}")
                await session.wait(after=after, timeout=60)
            status = await session.status()
            messages = await session.messages()
            await session.end()
    assert status.runs > 1, "the session continued as new"
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert results == ["Wrote /report.md (961 bytes).", "# Findings"]
    # the draft is in the write call's arguments once; no result carries it
    assert sum(str(m.model_dump()).count("A long draft line") for m in messages) == 50
    assert stored_paths(tmp_path) == [(f"session/{session.id}", "/report.md")]


PLANNER, WRITER, CRITIC = "You plan.", "You write from the plan.", "You criticise."


def team_model(request: RecordedRequest) -> Any:
    """The parent writes the plan and asks the writer, then the critic; the writer
    reads the plan from the shared workspace; the critic has no workspace tools."""
    messages = request.body["messages"]
    offered = sorted(t["function"]["name"] for t in request.body.get("tools", []))
    results = [m for m in messages if m["role"] == "tool"]
    system = messages[0]["content"]
    if system == WRITER:
        if not results:
            return assistant_calls(("shared_read_file", {"path": "/plan.md"}))
        return assistant_text(f"wrote from: {results[-1]['content']}")
    if system == CRITIC:
        return assistant_text(f"my tools: {', '.join(offered) or 'none'}")
    steps = [
        ("shared_write_file", {"path": "/plan.md", "content": "1. intro 2. findings"}),
        ("writer", {"task": "write it"}),
        ("critic", {"task": "look at it"}),
    ]
    if len(results) < len(steps):
        return assistant_calls(steps[len(results)])
    return assistant_text("done")


async def test_a_sub_agent_reaches_the_workspace_only_when_its_spec_names_it(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """``session/{root}``: a session and its sub-agents share one tree; a sub-agent
    whose spec does not name the workspace has none of its tools."""
    kind = Workspace(f"sqlite:///{tmp_path / 'memory.sqlite'}", {"shared": "session/{root}"})
    shared = [{"kind": "workspace", "name": "shared"}]
    with ScriptedProvider(responder=team_model) as provider:
        writer = spec_for(provider, [], instructions=WRITER, toolsets=shared).model_dump()
        critic = spec_for(provider, [], instructions=CRITIC).model_dump()
        agents = [
            {"name": "writer", "description": "Writes", "spec": writer},
            {"name": "critic", "description": "Criticises", "spec": critic},
        ]
        spec = spec_for(provider, [], instructions=PLANNER, toolsets=shared, agents=agents)
        async with running_worker(temporal_env, task_queue, Registry([kind])):
            client = AgentClient(temporal_env.client, task_queue=task_queue)
            session = await client.start(spec, "plan and write", owner="token:alice")
            await client.session(session).result()
            messages = await client.session(session).messages()
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert results == [
        "Wrote /plan.md (20 bytes).",
        "wrote from: 1. intro 2. findings",
        "my tools: none",
    ]
    assert stored_paths(tmp_path) == [(f"session/{session}", "/plan.md")]
