"""What people read cannot be steered by what a model, a tool or a sender wrote: an
approval's description names every argument, whole, whatever comes first, control and
bidirectional characters show as escapes (in the approval view and on the terminal),
and ``trace`` writes its picture where it was asked, whatever the session id says."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.approval_policy import describe_arguments
from durable_agent._wire.messages import visible
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.project.test_cli import acli, address_of, registry
from tests.support.agent_harness import running_worker, spec_for

ESC, RLO = "\x1b", "\u202e"


def test_every_argument_is_named_and_hidden_characters_show() -> None:
    arguments = json.dumps({"note": "x" * 5000, "to": f"ann{RLO}evil", "amount": 5000})
    described = describe_arguments("transfer", arguments)
    assert "amount=5000" in described and 'note="' + "x" * 5000 + '"' in described  # whole
    assert RLO not in described and "\\u202e" in described
    assert visible(f"{ESC}[31mred\n", keep="\n") == "\\u001b[31mred\n"
    assert visible("\U000e0041") == "\\U000e0041"


async def test_the_terminal_shows_escapes_and_trace_writes_where_asked(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    hostile = f"{ESC}]0;owned{ESC}\\{ESC}[2J all good {RLO}0001 tnuoma"
    script = [assistant_calls(("get_time", {"city": "NYC"})), assistant_text(hostile)]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session_id = f"../../{tmp_path.name}-escape"
            await agents.start(spec_for(provider, ["get_time"]), "time?", session_id=session_id)
            await agents.session(session_id).result()
            address = address_of(temporal_env)
            shown = await acli("history", session_id, "--task-queue", task_queue, address=address)
            root = Path(__file__).parent.parent.parent  # the CLI's working folder
            before = sorted(root.glob("*.trace.html"))
            traced = await acli("trace", session_id, "--task-queue", task_queue, address=address)
            after = sorted(root.glob("*.trace.html"))
            picture = tmp_path / "asked.html"
            drawn = await acli(
                "trace",
                session_id,
                "--html",
                str(picture),
                "--task-queue",
                task_queue,
                address=address,
            )
    assert shown.returncode == 0, shown.stderr
    assert ESC not in shown.stdout and RLO not in shown.stdout
    assert "\\u001b[2J all good \\u202e0001 tnuoma" in shown.stdout
    assert traced.returncode == 0, traced.stderr
    assert "picture:" not in traced.stdout and "1 tool runs" in traced.stdout
    assert after == before, "trace without --html wrote a file"
    outside = (root / f"{session_id}.trace.html").resolve()  # where ../ would lead
    assert not outside.exists(), outside
    assert drawn.returncode == 0, drawn.stderr
    assert f"picture: {picture}" in drawn.stdout
    assert picture.read_text().count('<g class="tool">') == 1
