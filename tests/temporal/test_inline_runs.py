"""An agent run inside a user's own workflow: inline (the Session's loop in that
workflow, its calls that workflow's activities) and as a child session, both typed by
the agent's ``output_type``; a worker killed mid-tool; approvals by the user's update
handler and by an approver callback."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agent import Registry
from durable_agent._contracts.approvals import DecisionRequest
from durable_agent.capabilities import Capabilities, ProviderEndpoint
from durable_agent.temporal import DurableAgentPlugin
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.project.test_cli import address_of
from tests.support import inline_workflows as user
from tests.support.agent_harness import wait_for

ROOT = Path(__file__).parents[2]


def verdict_json(order_id: str, fraud: bool, score: float) -> str:
    return json.dumps({"order_id": order_id, "fraud": fraud, "score": score})


def plugin_for(provider: ScriptedProvider) -> DurableAgentPlugin:
    endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
    return DurableAgentPlugin(
        registry=Registry([user.order_history, user.hold_order]),
        preload_tokenizers=False,
        capabilities=Capabilities(models={"scripted": endpoint}),
    )


def _event_kinds(history: object) -> list[str]:
    return [
        e.WhichOneof("attributes").removesuffix("_event_attributes")
        for e in history.events  # type: ignore[attr-defined]
    ]


async def test_an_inline_run_decided_by_the_users_update_returns_the_typed_output(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    held = tmp_path / "held.txt"
    os.environ["INLINE_HELD"] = str(held)
    script = [
        assistant_calls(("order_history", {"order_id": "o-9"})),
        assistant_calls(("hold_order", {"order_id": "o-9"})),
        assistant_text(verdict_json("o-9", True, 0.93)),
    ]
    client = temporal_env.client
    try:
        with ScriptedProvider(script) as provider:
            async with Worker(
                client,
                task_queue=task_queue,
                workflows=[user.FraudCheckWorkflow],
                plugins=[plugin_for(provider)],
            ):
                handle = await client.start_workflow(
                    user.FraudCheckWorkflow.run,
                    "o-9",
                    id=f"fraud-{uuid.uuid4().hex[:8]}",
                    task_queue=task_queue,
                )

                async def asked() -> bool:
                    return bool(await handle.query(user.FraudCheckWorkflow.pending))

                await wait_for(asked, timeout=60)
                assert not held.exists(), "the gated tool waits for the person"
                pending = await handle.query(user.FraudCheckWorkflow.pending)
                assert [p.tool_name for p in pending] == ["hold_order"]
                # a client with the plugin: a refused update says why, and which wait
                said = await Client.connect(
                    address_of(temporal_env), plugins=[DurableAgentPlugin()]
                )
                with pytest.raises(WorkflowUpdateFailedError) as refused:
                    await said.get_workflow_handle(handle.id).execute_update(
                        user.FraudCheckWorkflow.decide,
                        DecisionRequest(approval_id="turn9-call9", decision="approve", by="ana"),
                    )
                assert "no call waits for a decision" in str(refused.value)
                assert f"(waiting: {pending[0].approval_id})" in str(refused.value)
                assert not held.exists(), "the refused decision ran nothing"
                decided = await handle.execute_update(
                    user.FraudCheckWorkflow.decide,
                    DecisionRequest(
                        approval_id=pending[0].approval_id, decision="approve", by="ana"
                    ),
                )
                verdict = await handle.result()
                history = await handle.fetch_history()
    finally:
        os.environ.pop("INLINE_HELD", None)
    assert decided.by == "ana" and decided.decision == "approve"
    assert isinstance(verdict, user.Verdict), "the workflow returns the agent's output type"
    assert verdict == user.Verdict(order_id="o-9", fraud=True, score=0.93)
    assert held.read_text() == "o-9\n", "the approved call ran, once"
    kinds = _event_kinds(history)
    assert "start_child_workflow_execution_initiated" not in kinds, "no session workflow"
    activities = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert activities.count("call_model") == 3 and activities.count("run_tool") == 2, activities
    # the tool's result went to the model in the caller's run, paired with its call
    second = provider.requests[1].body["messages"]
    assert second[-1]["role"] == "tool" and "3 chargebacks" in second[-1]["content"]


async def test_an_approver_callback_decides_and_a_second_run_goes_on_from_the_first(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("hold_order", {"order_id": "o-3"}), ("hold_order", {"order_id": "x-4"})),
        assistant_text(verdict_json("o-3", True, 0.8)),
        assistant_text(verdict_json("o-3", False, 0.1)),
    ]
    client = temporal_env.client
    with ScriptedProvider(script) as provider:
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[user.AutoApprovedCheck],
            plugins=[plugin_for(provider)],
        ):
            first, second = await client.execute_workflow(
                user.AutoApprovedCheck.run,
                "o-3",
                id=f"auto-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
    assert json.loads(first) == {"order_id": "o-3", "fraud": True, "score": 0.8}
    assert json.loads(second)["fraud"] is False
    results = [m for m in provider.requests[1].body["messages"] if m["role"] == "tool"]
    assert results[0]["content"] == "o-3 held", "the approver approved o-3's hold"
    assert "x-4" not in results[1]["content"] and "denied" in results[1]["content"].lower()
    # the second run was sent the first one's conversation, then its own question
    last = provider.requests[2].body["messages"]
    assert [m["role"] for m in last].count("system") == 1, "the instructions once"
    assert "Is order o-3 fraud?" in json.dumps(last) and last[-1]["content"] == "And now?"


async def test_a_child_run_is_typed_the_same(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_text(verdict_json("o-5", False, 0.05))]
    client = temporal_env.client
    with ScriptedProvider(script) as provider:
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[user.ChildFraudCheck],
            plugins=[plugin_for(provider)],
        ):
            handle = await client.start_workflow(
                user.ChildFraudCheck.run,
                "o-5",
                id=f"child-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
            verdict = await handle.result()
            kinds = _event_kinds(await handle.fetch_history())
    assert verdict == user.Verdict(order_id="o-5", fraud=False, score=0.05)
    assert "child_workflow_execution_completed" in kinds
    assert "activity_task_scheduled" not in kinds, "the child did the work"


async def test_an_inline_run_refused_by_the_worker_fails_the_workflow_saying_why(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The worker does not register the endpoint the agent names: the caller's workflow
    fails (it does not retry its task forever), naming what is missing."""
    client = temporal_env.client
    plugin = DurableAgentPlugin(
        registry=Registry([user.order_history, user.hold_order]),
        preload_tokenizers=False,
        capabilities=Capabilities(),
    )
    async with Worker(
        client, task_queue=task_queue, workflows=[user.AutoApprovedCheck], plugins=[plugin]
    ):
        try:
            await client.execute_workflow(
                user.AutoApprovedCheck.run,
                "o-1",
                id=f"refused-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
        except WorkflowFailureError as error:
            failure = error.cause
        else:
            raise AssertionError("the run was admitted")
    text = str(getattr(failure, "message", failure))
    assert "does not admit" in text and "'scripted'" in text, text


async def test_an_inline_run_survives_a_worker_killed_mid_tool(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The tool's first attempt hangs; the worker process is SIGKILLed while it runs; a
    fresh worker (no workflow cache: the run replays from history) retries the tool and
    the workflow returns the typed verdict. The model was asked twice, not again."""
    ledger = tmp_path / "ledger.txt"
    script = [
        assistant_calls(("order_history", {"order_id": "o-7"})),
        assistant_text(verdict_json("o-7", True, 0.7)),
        assistant_text(verdict_json("o-7", True, 0.7)),
    ]
    with ScriptedProvider(script) as provider:
        address = temporal_env.client.service_client.config.target_host
        args = [sys.executable, "-m", "tests.support.inline_worker", address, task_queue]
        env = {**os.environ, "INLINE_LEDGER": str(ledger), "SCRIPTED_URL": provider.base_url}

        def start() -> subprocess.Popen[str]:
            process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
            return process

        worker = await asyncio.to_thread(start)
        try:
            handle = await temporal_env.client.start_workflow(
                "AutoApprovedCheck",
                "o-7",
                id=f"killed-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )

            async def tool_started() -> bool:
                return ledger.exists()

            await wait_for(tool_started, timeout=60)
            worker.kill()
            worker.wait()
            worker = await asyncio.to_thread(start)
            first, _ = await handle.result()
        finally:
            worker.kill()
            worker.wait()
    assert json.loads(first) == {"order_id": "o-7", "fraud": True, "score": 0.7}
    assert ledger.read_text().splitlines() == [
        "order_history o-7 attempt 1",
        "order_history o-7 attempt 2",
    ]
    assert len(provider.requests) == 3, "two calls of the first run, one of the second: none again"


async def test_two_inline_runs_in_one_workflow_keep_their_calls_apart(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Each run starts at turn 1: its calls' idempotency keys (what a tool's effect
    check keys on) must still differ, or the second run's call would be taken for the
    first's."""
    keys = tmp_path / "keys.txt"
    os.environ["INLINE_KEYS"] = str(keys)
    script = [
        assistant_calls(("order_history", {"order_id": "o-2"})),
        assistant_text(verdict_json("o-2", False, 0.1)),
    ] * 2
    client = temporal_env.client
    try:
        with ScriptedProvider(script) as provider:
            async with Worker(
                client,
                task_queue=task_queue,
                workflows=[user.TwoChecks],
                plugins=[plugin_for(provider)],
            ):
                workflow_id = f"two-{uuid.uuid4().hex[:8]}"
                await client.execute_workflow(
                    user.TwoChecks.run, "o-2", id=workflow_id, task_queue=task_queue
                )
    finally:
        os.environ.pop("INLINE_KEYS", None)
    first, second = keys.read_text().splitlines()
    assert first != second, "each run's call has its own key"
    assert first.startswith(f"{workflow_id}/run-") and second.startswith(f"{workflow_id}/run-")


async def test_a_failed_inline_run_answers_its_query_with_the_failure(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A client polling ``pending`` for calls to decide learns that the run failed, and
    why, instead of reading "nothing waits" for ever."""
    client = temporal_env.client
    plugin = DurableAgentPlugin(
        registry=Registry([user.order_history, user.hold_order]),
        preload_tokenizers=False,
        capabilities=Capabilities(),  # the agent's endpoint is not registered: refused
    )
    async with Worker(
        client, task_queue=task_queue, workflows=[user.FraudCheckWorkflow], plugins=[plugin]
    ):
        handle = await client.start_workflow(
            user.FraudCheckWorkflow.run,
            "o-2",
            id=f"failed-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        with pytest.raises(WorkflowQueryFailedError) as asked:
            await handle.query(user.FraudCheckWorkflow.pending)
    assert "the agent run failed" in str(asked.value) and "does not admit" in str(asked.value)
