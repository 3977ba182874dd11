"""Durable evaluations: a dataset run as a parent workflow of one-shot case sessions,
scored by exact text, tool calls and a model judge; a worker killed mid-run costs no
case twice; a budget stops new cases; the CLI prints the table and writes the HTML
report, which a real browser renders beside another run's."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.evals import EvalCase, ExpectedCall
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.project.test_cli import acli, address_of
from tests.support import cli_tools
from tests.support.agent_harness import (
    record_history,
    running_worker,
    spec_for,
    start_worker_process,
    wait_for,
)
from tests.support.browser import chromium_page

JUDGE = "You judge."
registry = Registry([cli_tools.get_time])


class Model:
    """Case k asks the time first when k is a multiple of 3; answers ``answer k`` (or
    ``wrong`` when k % 5 == 4). The judge always finds the rubric met."""

    def __init__(self) -> None:
        self.first_calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> AssistantMessage:
        messages = request.body["messages"]
        if messages[0]["content"] == JUDGE:
            return assistant_text(json.dumps({"score": 1, "reason": "meets the rubric"}))
        case = next(m["content"] for m in messages if m["role"] == "user")
        k = int(case.split()[1])
        asked = any(m["role"] == "tool" for m in messages)
        if not asked:
            with self._lock:
                self.first_calls[case] += 1
        if k % 3 == 0 and not asked:
            return assistant_calls(("get_time", {"city": "Tokyo"}))
        return assistant_text("wrong" if k % 5 == 4 else f"answer {k}")


def cases(count: int) -> list[EvalCase]:
    return [
        EvalCase(
            id=f"c{k:02d}",
            input=f"case {k}",
            expected=f"answer {k}",
            tools=[ExpectedCall(name="get_time", arguments={"city": "Tokyo"})]
            if k % 3 == 0
            else [],
            criteria="answers the case" if k % 10 == 0 else None,
        )
        for k in range(count)
    ]


def judge_spec(provider: ScriptedProvider) -> Any:
    return spec_for(provider, [], instructions=JUDGE)


async def scheduled(client: Any, workflow_id: str, name: str) -> int:
    found = 0
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            found += event.activity_task_scheduled_event_attributes.activity_type.name == name
    return found


@pytest.mark.timeout(600)
async def test_thirty_cases_survive_a_killed_worker_each_scored_once_within_budget(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    model = Model()
    with ScriptedProvider(responder=model) as provider:
        spec = spec_for(provider, ["get_time"])
        worker = start_worker_process(temporal_env, task_queue)
        try:
            agents = AgentClient(temporal_env.client, task_queue=task_queue, query_timeout=60)
            eval_id = await agents.evals.start(
                spec,
                cases(30),
                agent="clock",
                concurrency=4,
                max_total_tokens=5_000,
                judge=judge_spec(provider),
            )
            # a worker dies with cases done and cases running; another takes over
            await wait_for(lambda: _scored(agents, eval_id, 6), timeout=120)
            worker.send_signal(signal.SIGKILL)
            worker.wait(15)
            worker = start_worker_process(temporal_env, task_queue)
            report = await agents.evals.report(eval_id, wait=True)
        finally:
            worker.terminate()
            worker.wait(15)
    assert report.done and [c.id for c in report.cases] == [f"c{k:02d}" for k in range(30)]
    assert {c.status for c in report.cases} == {"scored"}
    for k, case in enumerate(report.cases):
        scores = {s.name: s.score for s in case.scores}
        assert scores["exact"] == (0.0 if k % 5 == 4 else 1.0), case
        assert scores["tools"] == 1.0, case
        assert ("judge" in scores) == (k % 10 == 0)
        if k % 10 == 0:
            assert scores["judge"] == 1.0 and "meets the rubric" in case.scores[-1].reason
    # no case ran twice: one session each (its first model call made once, unless a
    # call in flight on the killed worker was made again), one scoring each
    assert await scheduled(temporal_env.client, eval_id, "score_case") == 30
    assert set(model.first_calls) == {f"case {k}" for k in range(30)}
    assert sum(model.first_calls.values()) <= 30 + 4
    assert report.tokens <= 5_000 and report.tokens == sum(c.tokens for c in report.cases) + (
        3 * 15  # the judge's three sessions
    )


async def _scored(agents: AgentClient, eval_id: str, count: int) -> bool:
    try:
        report = await agents.evals.report(eval_id)
    except Exception:
        return False
    return sum(c.status == "scored" for c in report.cases) >= count


async def test_a_spent_budget_stops_new_cases(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider(responder=Model()) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            some = [c for c in cases(10) if c.criteria is None]
            # a recorded history replays under its file's name: the case ids come from it
            recording = os.environ.get("DURABLE_AGENT_RECORD_HISTORIES")
            eval_id = await agents.evals.start(
                spec_for(provider, ["get_time"]),
                some,
                concurrency=1,
                max_total_tokens=40,
                eval_id="evaluation" if recording else None,
            )
            report = await agents.evals.report(eval_id, wait=True)
            await record_history(client.get_workflow_handle(eval_id), "evaluation")
            with pytest.raises(ValueError, match="c00 have criteria: give a judge"):
                await agents.evals.start(spec_for(provider, []), cases(1))
    statuses = [c.status for c in report.cases]
    # c01 (15 tokens), c02 (15) and c03 (a tool round: 30) ran; 60 >= 40: no more
    assert statuses == ["scored"] * 3 + ["skipped"] * 6, statuses
    assert report.tokens == 60 and report.cases[-1].error == "the budget was spent"


async def test_the_cli_runs_a_dataset_and_its_report_renders_in_a_browser(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    with ScriptedProvider(responder=Model()) as provider:
        spec = tmp_path / "spec.json"
        spec.write_text(spec_for(provider, ["get_time"]).model_dump_json())
        judge = tmp_path / "judge.json"
        judge.write_text(judge_spec(provider).model_dump_json())
        dataset = tmp_path / "cases.jsonl"
        dataset.write_text(
            "\n".join(c.model_dump_json(by_alias=True, exclude_none=True) for c in cases(5))
        )
        async with running_worker(temporal_env, task_queue, registry):
            address = address_of(temporal_env)
            common = ("--task-queue", task_queue, "--spec", str(spec), "--judge-spec", str(judge))
            first = await acli(
                "eval",
                str(dataset),
                *common,
                "--eval-id",
                f"{task_queue}-a",
                "--html",
                str(tmp_path / "a.html"),
                address=address,
                timeout=120,
            )
            assert first.returncode == 0, first.stderr
            second = await acli(
                "eval",
                str(dataset),
                *common,
                "--eval-id",
                f"{task_queue}-b",
                "--compare",
                f"{task_queue}-a",
                "--html",
                str(tmp_path / "b.html"),
                address=address,
                timeout=120,
            )
            assert second.returncode == 0, second.stderr
            bad = tmp_path / "bad.jsonl"
            bad.write_text('{"id": "x", "input": "hi"}\n{"id": "y"}\n')
            refused = await acli("eval", str(bad), *common, address=address)
            assert refused.returncode != 0 and "line 2" in refused.stderr
    said = second.stdout.splitlines()
    header = next(i for i, line in enumerate(said) if line.split()[:2] == ["CASE", "STATUS"])
    # each case told as it finished, before the table
    progress = [line.split(":")[0] for line in said[:header] if line.startswith("case ")]
    assert sorted(progress) == ["case c00", "case c01", "case c02", "case c03", "case c04"]
    table = said[header - 1 :]
    assert table[1].split()[:2] == ["CASE", "STATUS"] and "WAS" in table[1]
    assert [line.split()[0] for line in table[2:7]] == ["c00", "c01", "c02", "c03", "c04"]
    assert table[6].split()[2:4] == ["0.50", "0.50"]  # c04: "wrong", no tool call
    async with chromium_page() as page:
        await page.goto((tmp_path / "b.html").as_uri())
        rows = page.locator("#cases tbody tr")
        assert await rows.count() == 5
        assert "mean" in await page.locator("#totals").inner_text()
        assert f"against {task_queue}-a" in await page.locator("#against").inner_text()
        await page.click("a[href='#case-c03']")
        section = page.locator("#case-c03")
        assert "get_time" in await section.inner_text()
        assert "answer 3" in await section.inner_text()
