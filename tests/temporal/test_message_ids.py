"""Stable ids on every message of a new session's array: the loop's own messages, the
model's replies, tool results and people's messages alike, each ``m<position>`` unless
it came with an id of its own. They are the same when read at any time: across
continue-as-new, a new worker replaying the session, and the next model call, which
still refers to tool results by reference (the workers stamp the id before they digest
and store a result). A session opened before ids keeps its array as it was: the pure
Session's tests (``tests/session/test_carried_state.py``) show that."""

from __future__ import annotations

from temporalio.client import Client, WorkflowHistory
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import UserMessage
from durable_agent._wire.transcript import message_id
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import record_history, running_worker, spec_for
from tests.support.histories import activity_inputs

registry = Registry()


@tool(registry=registry)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def test_every_message_of_a_new_session_has_a_stable_id(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("lookup", {"key": "a"}), ("lookup", {"key": "b"})),
        assistant_text("a and b looked up"),
        assistant_text("hello again"),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["lookup"], session={"continue_as_new_after_events": 20})
        spec = spec.model_copy(update={"instructions": "Be brief."})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "look up a and b")
            first_run = await agents.temporal.get_workflow_handle(sid).describe()
            await agents.session(sid).wait(timeout=30)
            before = await agents.session(sid).messages()
        # another worker takes over: it replays the session to go on
        async with running_worker(temporal_env, task_queue, registry):
            cursor = await agents.session(sid).send(UserMessage(content="hi", id="client-7"))
            await agents.session(sid).wait(after=cursor, timeout=30)
            status = await agents.session(sid).status()
            await agents.session(sid).end()
            await agents.session(sid).result()
            after = await agents.session(sid).messages()
            await record_history(
                client.get_workflow_handle(sid, run_id=first_run.run_id), "message_ids"
            )
            histories = await _all_runs(client, sid)

    roles = [m.role for m in after]
    assert roles == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    expected = [message_id(k) for k in range(len(after))]
    expected[6] = "client-7"  # a person's own id is kept
    assert [m.id for m in after] == expected
    assert len(set(expected)) == len(expected)
    # read during the session, after continue-as-new and on another worker: the same
    assert status.runs >= 2
    assert [m.id for m in before] == expected[: len(before)]
    assert [m.model_dump() for m in before] == [m.model_dump() for m in after[: len(before)]]

    # the workers were told each id: the reply and the results came back with it
    calls = [call for h in histories for call in activity_inputs(h, "call_model")]
    runs = [run for h in histories for run in activity_inputs(h, "run_tool")]
    # (the new worker's first call is sent again for what it lacks: the same id)
    by_turn = {1: "m2", 2: "m5", 3: "m7"}
    assert [call["message_id"] for call in calls] == [by_turn[call["turn"]] for call in calls]
    assert sorted({call["turn"] for call in calls}) == [1, 2, 3]
    runs.sort(key=lambda run: run["slot"])
    assert [run["message_id"] for run in runs] == ["m3", "m4"]


async def test_results_with_ids_still_go_to_the_next_call_by_reference(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The workers stamp the id on a result before they digest and store it, so the
    result that joins the array is the one history holds: the next model call refers to
    it by its hash instead of carrying it again."""
    script = [
        assistant_calls(("lookup", {"key": "a"}), ("lookup", {"key": "b"})),
        assistant_text("a and b looked up"),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["lookup"], session={"end_after_reply": True})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "look up a and b")
            await agents.session(sid).result()
            messages = await agents.session(sid).messages()
            history = await client.get_workflow_handle(sid).fetch_history()
    assert [m.id for m in messages] == ["m0", "m1", "m2", "m3", "m4"]
    second = activity_inputs(history, "call_model")[1]
    assert second["message_id"] == "m4"
    sent = second["messages"]
    assert [m for m in sent if "role" in m] == [], "a result was carried again"
    assert len(sent) == 2 and all(set(m) == {"stored"} for m in sent), sent


async def _all_runs(client: Client, sid: str) -> list[WorkflowHistory]:
    """The histories of every run of the session, the first first."""
    runs = [r async for r in client.list_workflows(f'WorkflowId = "{sid}"')]
    runs.sort(key=lambda run: run.start_time)
    return [await client.get_workflow_handle(sid, run_id=r.run_id).fetch_history() for r in runs]


async def test_a_branch_keeps_its_parents_ids_and_goes_on_from_them(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("lookup", {"key": "a"})),
        assistant_text("a looked up"),
        assistant_text("c it is"),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["lookup"])
        spec = spec.model_copy(update={"instructions": "Be brief."})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "look up a")
            await agents.session(sid).wait(timeout=30)
            parent = await agents.session(sid).messages()
            branch = await agents.session(sid).fork(len(parent), spec, "and c?")
            await agents.session(branch).wait(after=len(parent), timeout=30)
            forked = await agents.session(branch).messages()
    assert [m.id for m in parent] == ["m0", "m1", "m2", "m3", "m4"]
    assert [m.id for m in forked] == [*(m.id for m in parent), "m5", "m6"]
    assert [m.model_dump() for m in forked[: len(parent)]] == [m.model_dump() for m in parent]
