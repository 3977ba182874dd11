"""A worker's JSON log lines (``--log-json``) carry the session, turn, attempt and
agent: those of activities (bound once per activity) and of the workflow (temporalio's
replay-safe logger, the fields passed along). A workflow that is replayed from scratch
on every task writes each of its lines once."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support import cli_tools
from tests.support.agent_harness import running_worker, spec_for, wait_for, worker_process

SWARM = {
    "default_agent": "front",
    "agents": [
        {"name": "front", "description": "Greets", "instructions": "Greet.", "handoffs": ["clock"]},
        {
            "name": "clock",
            "description": "Tells time",
            "instructions": "Time.",
            "tools": ["get_time"],
        },
    ],
}


def lines(path: Path) -> list[dict[str, Any]]:
    found = []
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            found.append(json.loads(line))
    return found


async def test_every_session_line_names_its_session_turn_attempt_and_agent(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    script = [
        assistant_calls(("transfer_to_clock", {"reason": "time question"})),
        assistant_calls(("get_time", {"city": "Tokyo"})),
        assistant_text("22:00 in Tokyo"),
    ]
    log = tmp_path / "worker.log"
    with (
        ScriptedProvider(script) as provider,
        worker_process(temporal_env, task_queue, "--log-level", "info", "--log-json", stderr=log),
    ):
        agents = AgentClient(temporal_env.client, task_queue=task_queue)
        spec = spec_for(provider, swarm=SWARM)
        session = await agents.start(spec, "time in Tokyo?")
        await temporal_env.client.get_workflow_handle(session).signal("cancel_turn", "x")
        assert (await agents.session(session).result()).status == "done"
        await wait_for(lambda: _ended_logged(log), timeout=20)
    found = [line for line in lines(log) if line.get("session_id") == session]
    events = [line["event"] for line in found]
    assert any(e.startswith("session ended: done") for e in events), events
    assert any(e.startswith("signal changed nothing") for e in events), events
    model_turns = [line for line in found if line["event"] == "model turn"]
    assert len(model_turns) == 3 and {line["level"] for line in found} >= {"info", "warning"}
    for line in found:
        assert line["turn"] is not None and line["attempt"] >= 1, line
    by_agent = [(line["turn"], line.get("agent")) for line in model_turns]
    assert by_agent == [(1, "front"), (2, "clock"), (3, "clock")], by_agent
    [tool_line] = [line for line in found if line["event"] == "tool call"]
    assert tool_line["agent"] == "clock" and tool_line["activity"] == "run_tool"
    unbound = [
        line for line in lines(log) if "session" in line["event"] and "session_id" not in line
    ]
    assert not unbound, unbound


async def _ended_logged(log: Path) -> bool:
    return log.exists() and "session ended" in log.read_text()


async def test_a_replayed_workflow_writes_each_line_once(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    workflow_log = logging.getLogger("temporalio.workflow")
    workflow_log.addHandler(handler)
    level = workflow_log.level
    workflow_log.setLevel(logging.INFO)
    try:
        registry = Registry([cli_tools.get_time])
        replies = [assistant_calls(("get_time", {"city": "NYC"})), assistant_text("09:00")]
        with ScriptedProvider(replies) as provider:
            async with running_worker(temporal_env, task_queue, registry, max_cached_workflows=0):
                agents = AgentClient(temporal_env.client, task_queue=task_queue)
                session = await agents.start(spec_for(provider, ["get_time"]), "time?")
                handle = temporal_env.client.get_workflow_handle(session)
                await handle.signal("cancel_turn", "not now")  # rejected: a warning
                assert (await agents.session(session).result()).status == "done"
    finally:
        workflow_log.removeHandler(handler)
        workflow_log.setLevel(level)
    mine = [r for r in records if getattr(r, "session_id", None) == session]
    texts = [r.getMessage().split(" ({")[0] for r in mine]
    assert texts.count("session ended: done (final_answer)") == 1, texts
    assert sum(t.startswith("signal changed nothing") for t in texts) == 1, texts
    assert all(getattr(r, "turn", None) is not None for r in mine)
