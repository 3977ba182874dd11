"""The replay gate (``durable-agent check-replay``): this project's recorded histories,
including ones recorded before later patches, replay against the working tree; a
history whose commands today's code does not issue (as a run started before an
unpatched change would have) fails the gate, naming the command, the run's patch
markers and the fix; running sessions are checked from the server."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import running_worker, spec_for

HISTORIES = Path(__file__).parent.parent / "histories"


async def test_the_recorded_histories_pass_the_gate_and_an_unpatched_change_fails_it(
    tmp_path: Path,
) -> None:
    # (the webhook kind's history too: a kind's targets replay without its code)
    passed = await acli("check-replay", str(HISTORIES), timeout=300)
    count = len(list(HISTORIES.glob("*.json")))
    assert passed.returncode == 0, passed.stdout[-2000:] + passed.stderr[-2000:]
    assert passed.stdout.splitlines()[-1] == f"{count} of {count} histories replay"
    # a run whose history scheduled another activity where today's code schedules
    # call_model: the gate fails and says what to do
    history = json.loads((HISTORIES / "multi_turn_session.json").read_text())
    scheduled = next(
        e["activityTaskScheduledEventAttributes"]
        for e in history["events"]
        if e.get("activityTaskScheduledEventAttributes", {}).get("activityType", {}).get("name")
        == "call_model"
    )
    scheduled["activityType"]["name"] = "call_model_v0"
    (tmp_path / "changed.json").write_text(json.dumps(history))
    failed = await acli(
        "check-replay", str(tmp_path / "changed.json"), str(HISTORIES / "approval.json")
    )
    assert failed.returncode == 1
    lines = failed.stdout.splitlines()
    assert lines[0].endswith("changed.json: DIVERGES")
    assert "activity type is 'call_model' where the history recorded 'call_model_v0'" in lines[2]
    assert "patch markers ['baseline-2026-11-28b']" in lines[2]
    assert 'workflow.patched("<a new id>")' in lines[2]
    assert lines[-1] == "1 of 2 histories replay"
    nothing = await acli("check-replay")
    assert nothing.returncode != 0 and "nothing to replay" in nothing.stderr


async def test_running_sessions_are_checked_from_the_server(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("hello")]) as provider:
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec_for(provider, [], session={}), "hi")
            await agents.session(session).wait(after=0, timeout=60)
            checked = await acli(
                "check-replay",
                "--running",
                "--sample",
                "50",
                "--task-queue",
                task_queue,
                address=address_of(temporal_env),
                timeout=300,
            )
            await agents.session(session).end()
    assert checked.returncode == 0, checked.stdout[-2000:] + checked.stderr[-2000:]
    assert f"running {session}: replays" in checked.stdout


def test_a_history_newer_than_the_code_is_a_rollback_not_a_patch() -> None:
    """A history that carries a patch marker today's code does not know was recorded by
    newer code (a rollback): the gate says to roll forward or let those sessions end,
    not to add a patch."""
    from temporalio.client import WorkflowHistory

    from durable_agent.temporal._replay_gate import explain

    text = (HISTORIES / "multi_turn_session.json").read_text()
    # the run's one marker (the previous release's baseline), renamed as a later release
    # would have named a new one
    marker = base64.b64encode(b'{"id":"baseline-2026-11-28b","deprecated":false}').decode()
    assert marker in text
    renamed = base64.b64encode(b'{"id":"from-a-newer-release","deprecated":false}').decode()
    newer = WorkflowHistory.from_json("s", text.replace(marker, renamed))
    said = explain("Nondeterminism error: ...", newer)
    assert "recorded by newer code than today's" in said and "from-a-newer-release" in said
    assert "workflow.patched" not in said
    today = WorkflowHistory.from_json("s", text)
    assert 'workflow.patched("<a new id>")' in explain("Nondeterminism error: ...", today)
