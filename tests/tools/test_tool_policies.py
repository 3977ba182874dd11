"""Tool policies at work on the real server: predicate approval, sequential mode,
approval deadlines, stop tools, structured output, task-queue routing, missing tools."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import ToolMessage
from durable_agent._contracts.approvals import ApprovalSignal
from durable_agent._spec.tools import ToolContext
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.temporal import build_worker
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import (
    LOCAL_DEVELOPMENT,
    query_messages,
    query_status,
    record_history,
    running_worker,
    spec_for,
    start_session,
    tool_messages,
    wait_for,
)

registry = Registry()
running: set[str] = set()
overlaps: dict[str, set[str]] = {}
ledger_log: list[str] = []
neighbours = asyncio.Barrier(2)
transfers: list[str] = []


def _large(arguments: dict[str, Any]) -> bool:
    return bool(arguments["amount"] > 100)


@tool(registry=registry, approval=_large)
def transfer(amount: int, to: str, ctx: ToolContext) -> str:
    """Move money; amounts over 100 need a person's approval."""
    transfers.append(f"{ctx.idempotency_key}:{amount}:{to}")
    return f"sent {amount} to {to}"


async def _ledger_work(entry: str) -> None:
    """Note which calls ran alongside this one (by what was running, not by clock); ``r1``
    and ``r2`` meet at a barrier only calls running at once can pass."""
    overlaps[entry] = set(running)
    for other in running:
        overlaps[other].add(entry)
    running.add(entry)
    ledger_log.append(f"start {entry}")
    if entry in ("r1", "r2"):
        await asyncio.wait_for(neighbours.wait(), 60)
    else:
        await asyncio.sleep(0.3)  # capacity for a wrong overlap to happen
    running.discard(entry)
    ledger_log.append(f"end {entry}")


@tool(registry=registry, execution_mode="sequential")
async def write_ledger(entry: str) -> str:
    """Append to a ledger; never overlaps another call."""
    await _ledger_work(entry)
    return f"wrote {entry}"


@tool(registry=registry)
async def read_ledger(entry: str) -> str:
    """Read from the ledger; may overlap other parallel calls."""
    await _ledger_work(entry)
    return f"read {entry}"


@tool(registry=registry, approval="always", approval_timeout_seconds=1.0)
def shutdown(host: str) -> str:
    """Shut a host down (denied unless someone approves within a second)."""
    return f"{host} is down"


@tool(
    registry=registry,
    approval="always",
    approval_timeout_seconds=1.0,
    approval_timeout_decision="approved",
)
def restart(host: str) -> str:
    """Restart a host (approved by default when nobody answers in time)."""
    return f"{host} restarted"


@tool(registry=registry)
def submit_report(title: str) -> str:
    """File the final report: the session's answer."""
    return f"report filed: {title}"


@tool(registry=registry)
def where_am_i() -> str:
    """Which worker pool ran this call."""
    return "session pool"


gpu_registry = Registry()


@tool(registry=gpu_registry, name="where_am_i")
def where_am_i_on_gpu() -> str:
    """Which worker pool ran this call."""
    return "gpu pool"


async def test_predicate_gates_only_the_calls_it_selects(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    transfers.clear()
    script = [
        assistant_calls(
            ("transfer", {"amount": 20, "to": "ann"}), ("transfer", {"amount": 500, "to": "bob"})
        ),
        assistant_text("small one sent, large one approved"),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            handle = await start_session(
                client, task_queue, spec_for(provider, ["transfer"]), "pay"
            )
            pending = await wait_for(lambda: _pending(handle))
            assert [(p.approval_id, p.tool_name) for p in pending] == [("turn1-call1", "transfer")]
            assert '"amount": 500' in pending[0].arguments and transfers == []  # nothing ran yet
            await handle.signal("approve", ApprovalSignal(approval_id="turn1-call1", by="ops"))
            result = await handle.result()
            messages = await query_messages(handle)
    assert result.status == "done"
    small, large = tool_messages(messages)
    assert small.content == "sent 20 to ann" and small.approval is None
    assert large.content == "sent 500 to bob" and large.approval and large.approval.by == "ops"
    assert transfers == [f"{handle.id}:1:0:20:ann", f"{handle.id}:1:1:500:bob"]


async def _pending(handle: Any) -> list[Any]:
    status = await query_status(handle)
    return status.pending_approvals


async def test_sequential_calls_never_overlap_another_call(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    running.clear(), overlaps.clear(), ledger_log.clear()
    batch = [
        ("read_ledger", {"entry": "r1"}),
        ("read_ledger", {"entry": "r2"}),
        ("write_ledger", {"entry": "w1"}),
        ("read_ledger", {"entry": "r3"}),
        ("write_ledger", {"entry": "w2"}),
    ]
    script = [assistant_calls(*batch), assistant_text("ledger done")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider, ["read_ledger", "write_ledger"])
            handle = await start_session(client, task_queue, spec, "ledger work")
            await handle.result()
            messages = await query_messages(handle)
    assert overlaps["w1"] == set() and overlaps["w2"] == set(), overlaps
    assert "r2" in overlaps["r1"], "parallel neighbours met at their barrier"
    assert [m.content for m in tool_messages(messages)] == [
        "read r1",
        "read r2",
        "wrote w1",
        "read r3",
        "wrote w2",
    ]


async def test_session_wide_sequential_mode_runs_one_call_at_a_time(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    running.clear(), overlaps.clear(), ledger_log.clear()
    script = [
        assistant_calls(*[("read_ledger", {"entry": f"s{k}"}) for k in range(3)]),
        assistant_text("read all"),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider, ["read_ledger"], tool_execution="sequential")
            handle = await start_session(client, task_queue, spec, "read")
            await handle.result()
    assert ledger_log == ["start s0", "end s0", "start s1", "end s1", "start s2", "end s2"]
    assert all(not seen for seen in overlaps.values()), overlaps


async def test_approval_deadline_applies_each_tools_default_decision(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("shutdown", {"host": "db1"}), ("restart", {"host": "web1"})),
        assistant_text("web1 restarted; db1 left running"),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider, ["shutdown", "restart"])
            handle = await start_session(client, task_queue, spec, "maintenance")
            pending = await wait_for(lambda: _pending(handle))
            result = await handle.result()
            messages = await query_messages(handle)
        await record_history(handle, "approval_timeout")
    assert [p.deadline is not None for p in pending] == [True, True]
    assert result.status == "done"
    down, restarted = tool_messages(messages)
    assert down.is_error and down.content.startswith("Tool call denied (no decision before")
    assert down.approval and down.approval.timed_out and down.approval.decision == "denied"
    assert restarted.content == "web1 restarted"
    assert restarted.approval and restarted.approval.timed_out
    assert restarted.approval.decision == "approved"


async def test_a_stop_tool_ends_the_reply_with_its_result(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("submit_report", {"title": "Q3"}), ("read_ledger", {"entry": "x"})),
        assistant_text("this reply must never be requested"),
    ]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(
                provider, ["submit_report", "read_ledger"], stop={"on_tools": ["submit_report"]}
            )
            handle = await start_session(client, task_queue, spec, "report")
            result = await handle.result()
    assert result.stop_reason == "stop_tool:submit_report"
    assert isinstance(result.final, ToolMessage) and result.final.content == "report filed: Q3"
    assert len(provider.requests) == 1


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_f": {"type": "number"}},
    "required": ["city", "temp_f"],
    "additionalProperties": False,
}


async def test_structured_output_is_parsed_and_validated(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    answers = ['{"city": "NYC", "temp_f": 72}', '{"city": "NYC", "temp_f": "warm"}', "72F"]
    results = []
    with ScriptedProvider([assistant_text(a) for a in answers]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            for k, _ in enumerate(answers):  # one attempt each: the rescue is tested apart
                spec = spec_for(provider, output_schema=SCHEMA, rescue={"strategy": "fail"})
                handle = await start_session(client, task_queue, spec, "weather as JSON")
                results.append(await handle.result())
                if k == 0:
                    await record_history(handle, "structured_output")
    good, wrong_type, not_json = results
    assert good.structured_output == {"city": "NYC", "temp_f": 72} and good.error is None
    assert wrong_type.structured_output is None and wrong_type.stop_reason == "unusable_reply"
    assert wrong_type.error and "temp_f: 'warm' is not of type 'number'" in wrong_type.error
    assert not_json.error and "not valid JSON" in not_json.error
    # the schema went to the provider as the response format
    sent = provider.requests[0].body["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"] == SCHEMA


async def test_task_queue_routes_a_tool_to_another_worker_pool(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    gpu_queue = f"{task_queue}-gpu"
    script = [assistant_calls(("where_am_i", {})), assistant_text("ran")]
    seen = []
    for settings in ({"name": "where_am_i"}, {"name": "where_am_i", "task_queue": gpu_queue}):
        with ScriptedProvider(script) as provider:
            async with (
                running_worker(temporal_env, task_queue, registry) as client,
                build_worker(
                    client,
                    task_queue=gpu_queue,
                    registry=gpu_registry,
                    capabilities=LOCAL_DEVELOPMENT,
                ),
            ):
                spec = spec_for(provider, [settings])
                handle = await start_session(client, task_queue, spec, "where?")
                await handle.result()
                seen.append(tool_messages(await query_messages(handle))[0].content)
    assert seen == ["session pool", "gpu pool"]


async def test_a_worker_missing_a_tool_fails_that_call_not_the_session(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The session resolved its tools on a worker that has them; the worker that runs
    the calls (after a deploy) lacks one. That call's slot says so; the session goes on."""
    script = [
        assistant_calls(
            ("transfer", {"amount": 500, "to": "eve"}), ("read_ledger", {"entry": "a"})
        ),
        assistant_text("one tool was missing"),
    ]
    partial = Registry([registry.get("transfer")])  # type: ignore[list-item]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["transfer", "read_ledger"])
        async with running_worker(temporal_env, task_queue, registry) as client:
            handle = await start_session(client, task_queue, spec, "go")
            await wait_for(lambda: _pending(handle))  # paused at the gate: nothing ran yet
        async with running_worker(temporal_env, task_queue, partial):
            await handle.signal("approve", ApprovalSignal(approval_id="turn1-call0"))
            result = await handle.result()
            messages = await query_messages(handle)
    assert result.status == "done" and result.final
    assert result.final.content == "one tool was missing"
    sent, missing = tool_messages(messages)
    assert sent.content == "sent 500 to eve"
    assert missing.is_error and "has not loaded it" in missing.content


async def test_an_answer_that_does_not_parse_can_stand_as_the_raw_text(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """``rescue.unparsed_output: raw``: the answer is taken as it is; its raw text is the
    structured output, and the error says why it did not parse. No rescue is asked."""
    with ScriptedProvider([assistant_text("72F and sunny")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider, output_schema=SCHEMA, rescue={"unparsed_output": "raw"})
            handle = await start_session(client, task_queue, spec, "weather as JSON")
            result = await handle.result()
    assert result.status == "done" and result.structured_output == "72F and sunny"
    assert result.error is not None and "not valid JSON" in result.error, result.error
    assert len(provider.requests) == 1, "no rescue was asked"
