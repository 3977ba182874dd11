"""Anthropic's memory tool served from the memory store: on the Anthropic wire the
tool goes as ``memory_20250818``; its commands run on memories in the call's
namespace, each write once; a path outside ``/memories`` changes nothing."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.document import AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._spec.tool_kinds import WorkerSide
from durable_agent._spec.tools import ToolContext, ToolsetSpec
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs.anthropic import anthropic_tools
from durable_agent._wire.codecs.chat import chat_tools
from durable_agent._wire.messages import ToolMessage
from durable_agent.capabilities import Memory
from durable_agent.capabilities._memory import MemoryTool, Scope
from durable_agent.testing import ScriptedProvider
from durable_agent.testing._scripted_provider import RecordedRequest, Reply, json_reply
from tests.support.agent_harness import running_worker

ALICE = Scope(user="token:alice", tenant="token:alice", session="s-1")


async def command(kind: Memory, slot: int, **arguments: object) -> tuple[str, bool]:
    context = ToolContext(
        session_id="s-1", turn=1, slot=slot, tool_call_id=f"c{slot}", idempotency_key=f"k{slot}"
    )
    return await kind.serve(MemoryTool(source="notes", tool="memory"), arguments, context, ALICE)


async def test_the_tool_goes_as_anthropics_own_type_on_its_wire(tmp_path: Path) -> None:
    kind = Memory(f"sqlite:///{tmp_path / 'm.sqlite'}", {"notes": "users/{user}"})
    source = ToolsetSpec(kind="memory", name="notes", prefix="", allowed_tools=["memory"])
    [tool] = await kind.tools(source, WorkerSide(None))
    assert anthropic_tools([tool.definition]) == [{"type": "memory_20250818", "name": "memory"}]
    [function] = chat_tools([tool.definition])  # other wires: a function of the same name
    assert function["function"]["name"] == "memory"
    prefixed = await kind.tools(source.model_copy(update={"prefix": "notes_"}), WorkerSide(None))
    assert anthropic_tools([prefixed[0].definition])[0]["name"] == "notes_memory"
    await kind.store.close()


async def test_the_commands_run_on_memories_once_each(tmp_path: Path) -> None:
    kind = Memory(f"sqlite:///{tmp_path / 'm.sqlite'}", {"notes": "users/{user}"})
    path = "/memories/customer.md"
    assert await command(
        kind, 0, command="create", path=path, file_text="Plan: Pro\nTone: warm"
    ) == (
        f"File created successfully at {path}",
        False,
    )
    await command(kind, 1, command="str_replace", path=path, old_str="Pro", new_str="Team")
    again = await command(kind, 1, command="str_replace", path=path, old_str="Pro", new_str="X")
    assert again == (f"The memory file {path} has been edited", False)  # the first answer
    await command(kind, 2, command="insert", path=path, insert_line=1, insert_text="Seats: 5")
    view = await command(kind, 3, command="view", path=path)
    assert view == ("     1\tPlan: Team\n     2\tSeats: 5\n     3\tTone: warm", False)
    assert await command(kind, 4, command="view", path="/memories") == (
        f"Directory: /memories\n- {path}",
        False,
    )
    await command(kind, 5, command="rename", old_path=path, new_path="/memories/alice.md")
    outside = await command(kind, 6, command="create", path="/etc/passwd", file_text="x")
    climbing = await command(kind, 7, command="create", path="/memories/../x", file_text="x")
    assert outside[1] and climbing[1]
    [kept] = await kind.store.listed()
    assert (kept.namespace, kept.key) == ("users/token:alice", "/memories/alice.md")
    assert await command(kind, 8, command="delete", path="/memories/alice.md") == (
        "Deleted /memories/alice.md",
        False,
    )
    assert await kind.store.listed() == []
    await kind.store.close()


def claude(request: RecordedRequest) -> Reply:
    """Claude on the Messages API: keeps a memory file, then says so."""
    last = request.body["messages"][-1]
    if any(block.get("type") == "tool_result" for block in last["content"]):
        content: list[dict[str, object]] = [{"type": "text", "text": "Saved."}]
    else:
        create = {"command": "create", "path": "/memories/alice.md", "file_text": "Plan: Pro"}
        content = [{"type": "tool_use", "id": "toolu_1", "name": "memory", "input": create}]
    return json_reply(
        {
            "type": "message",
            "role": "assistant",
            "content": content,
            "stop_reason": "tool_use" if content[0]["type"] == "tool_use" else "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    )


async def test_claude_keeps_a_memory_file_in_a_session_on_its_wire(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """A whole session on the Anthropic wire: the request offers Claude's own memory
    tool, Claude's command runs once on the user's namespace, and its result goes back
    as the ``tool_result`` of that ``tool_use``."""
    kind = Memory(f"sqlite:///{tmp_path / 'm.sqlite'}", {"notes": "tenant/{tenant}/user/{user}"})
    with ScriptedProvider(responder=claude) as server:
        endpoint = ProviderEndpoint(base_url=server.base_url, api="anthropic", api_key_env=None)
        model = ModelSpec(name="claude-scripted", endpoint=endpoint, stream=False)
        toolset = {"kind": "memory", "name": "notes", "prefix": "", "allowed_tools": ["memory"]}
        spec = AgentSpec.model_validate(
            {
                "model": model.model_dump(),
                "toolsets": [toolset],
                "session": {"end_after_reply": True},
            }
        )
        async with running_worker(temporal_env, task_queue, Registry([kind])) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "remember my plan", owner="token:alice")
            await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
        offered = server.requests[0].body["tools"]
        answered = server.requests[1].body["messages"][-1]["content"]
    assert offered == [{"type": "memory_20250818", "name": "memory"}]
    [result] = [m for m in messages if isinstance(m, ToolMessage)]
    assert result.content == "File created successfully at /memories/alice.md"
    assert not result.is_error
    assert [(b["type"], b["tool_use_id"]) for b in answered] == [("tool_result", "toolu_1")]
    stored = sqlite3.connect(tmp_path / "m.sqlite")
    rows = stored.execute("SELECT namespace, key_text FROM memories")
    assert rows.fetchall() == [("tenant/token:alice/user/token:alice", "/memories/alice.md")]
