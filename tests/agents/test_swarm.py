"""A swarm on the real server: three agents, each on its own provider (billing speaks
the Anthropic Messages API), handing the conversation over by tool and by a person,
with approvals, a handoff inside a parallel batch, continue-as-new with another agent
active, and the CLI reading agents off the session."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.document import AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._wire.messages import AssistantMessage, ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest, Reply, json_reply
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import (
    KILL_HEARTBEAT_SECONDS,
    record_history,
    running_worker,
    spec_for,
    temporal_cli,
    wait_for,
)
from tests.support.swarm_fixtures import PROMPTS, agent_of, swarm_registry, swarm_section
from tests.temporal.test_chaos import WorkerPool, ledger_effects
from tests.temporal.test_crash_recovery import slow_stream


def anthropic_billing(request: RecordedRequest) -> Reply:
    """Billing on the Messages API: refunds invoice 7 once triage hands over, then hands
    back."""
    last = request.body["messages"][-1]
    assert last["role"] == "user", last
    kinds = [block["type"] for block in last["content"]]
    if "tool_result" in kinds:
        use = {"name": "transfer_back", "input": {"reason": "refunded"}}
    else:
        use = {"name": "refund", "input": {"invoice": 7}}
    return json_reply(
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"toolu_{len(kinds)}", **use}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 20, "output_tokens": 5},
        }
    )


def chat_triage_and_tech(request: RecordedRequest) -> AssistantMessage:
    messages = request.body["messages"]
    agent, last = agent_of(messages), messages[-1]
    if agent == "triage" and last["role"] == "user" and last["content"] == "I want a refund":
        return assistant_calls(("lookup_account", {"customer": "ada"}))
    if agent == "triage" and last["role"] == "tool":
        return assistant_calls(("transfer_to_billing", {"reason": "double charge"}))
    return assistant_text(f"{agent}: all sorted")


def three_agents(chat: ScriptedProvider, anthropic: ScriptedProvider, **session: Any) -> AgentSpec:
    billing_model = ModelSpec(
        name="claude-scripted",
        endpoint=ProviderEndpoint(base_url=anthropic.base_url, api="anthropic", api_key_env=None),
        stream=False,
    )
    swarm = swarm_section(model=billing_model.model_dump())
    return spec_for(
        chat, ["lookup_account"], swarm=swarm, session={"end_after_reply": True, **session}
    )


async def test_three_agents_hand_over_with_an_approval_on_their_own_providers(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with (
        ScriptedProvider(responder=chat_triage_and_tech) as chat,
        ScriptedProvider(responder=anthropic_billing) as anthropic,
    ):
        spec = three_agents(chat, anthropic)
        async with running_worker(temporal_env, task_queue, swarm_registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "I want a refund")

            async def refund_waits() -> Any:
                status = await agents.session(session).status()
                return status if status.pending_approvals else None

            waiting = await wait_for(refund_waits, timeout=60)
            env = {"address": address_of(temporal_env)}
            shown = await acli("status", session, **env)
            await agents.session(session).approve(
                waiting.pending_approvals[0].approval_id, by="ops"
            )
            result = await asyncio.wait_for(agents.session(session).result(), 60)
            messages = await agents.session(session).messages()
            history = await acli("history", session, **env)
            await record_history(client.get_workflow_handle(session), "swarm")
    # the refund waited on billing, with triage on the stack
    assert (waiting.agent, waiting.agent_stack) == ("billing", ["triage"])
    assert waiting.pending_approvals[0].tool_name == "refund"
    assert "agent:          billing (back: triage)" in shown.stdout, shown.stdout
    assert result.final is not None and result.final.content == "triage: all sorted"
    assert [(m.role, m.agent_name) for m in messages][4:] == [
        ("assistant", "triage"),  # transfer_to_billing
        ("tool", "triage"),
        ("assistant", "billing"),  # refund
        ("tool", "billing"),
        ("assistant", "billing"),  # transfer_back
        ("tool", "billing"),
        ("assistant", "triage"),
    ]
    refund = messages[7]
    assert isinstance(refund, ToolMessage) and refund.content == "refunded invoice 7"
    assert refund.approval is not None and refund.approval.by == "ops"
    assert "[billing] refund: refunded invoice 7" in history.stdout, history.stdout
    # what each provider received: triage's requests on Chat Completions ...
    assert [agent_of(b["messages"]) for b in chat.bodies()] == ["triage", "triage", "triage"]
    last_chat = chat.bodies()[-1]["messages"]
    assert last_chat[-2] == {
        "role": "assistant",
        "content": '[billing called transfer_back {"reason":"refunded"}]',
        "name": "billing",
    }
    # ... billing's on the Messages API, with its own prompt, tools and the refund paired
    first, second = anthropic.bodies()
    assert first["system"] == PROMPTS["billing"] and first["model"] == "claude-scripted"
    assert sorted(t["name"] for t in first["tools"]) == [
        "lookup_account",
        "refund",
        "transfer_back",
        "transfer_to_tech",
        "transfer_to_triage",
    ]
    texts = [b.get("text", "") for m in first["messages"] for b in m["content"]]
    assert '[triage called transfer_to_billing {"reason": "double charge"}]' in texts
    assert not any(b["type"] == "tool_use" for m in first["messages"] for b in m["content"])
    [use] = [b for b in second["messages"][-2]["content"] if b["type"] == "tool_use"]
    [answer] = second["messages"][-1]["content"]
    assert answer["type"] == "tool_result" and answer["tool_use_id"] == use["id"]


async def test_a_handoff_in_a_parallel_batch_then_continue_as_new_and_a_move_by_the_cli(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The batch's other call runs and the results keep request order; tech answers
    across continue-as-new (its stack carried); a person moves the session to billing
    with the CLI, and billing answers the next message."""

    def model(request: RecordedRequest) -> AssistantMessage:
        messages = request.body["messages"]
        agent = agent_of(messages)
        if agent == "triage":
            return assistant_calls(
                ("lookup_account", {"customer": "ada"}), ("transfer_to_tech", {}), ids="call_0"
            )
        return assistant_text(f"{agent} answers: {messages[-1]['content']}")

    with ScriptedProvider(responder=model) as chat:
        session_rules = {"continue_as_new_after_events": 20}
        spec = spec_for(chat, ["lookup_account"], swarm=swarm_section(), session=session_rules)
        async with running_worker(temporal_env, task_queue, swarm_registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "my router is broken")

            async def tech_answered() -> Any:
                status = await agents.session(session).status()
                return status if status.phase == "idle" and status.runs > 1 else None

            after = await wait_for(tech_answered, timeout=60)
            env = {"address": address_of(temporal_env)}
            unknown = await acli("move", session, "legal", **env)
            moved = await acli("move", session, "billing", "--reason", "invoice question", **env)
            await wait_for(lambda: _agent_is(agents, session, "billing"))
            before = await agents.session(session).send("and my invoice?")
            answer = await agents.session(session).wait(after=before, timeout=60)
            status = await agents.session(session).status()
            messages = await agents.session(session).messages()
            await agents.session(session).end()
            await record_history(client.get_workflow_handle(session), "swarm_continued")
    assert (after.agent, after.agent_stack) == ("tech", ["triage"])
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [(r.tool_name, r.is_error, r.tool_call_id) for r in results] == [
        ("lookup_account", None, "call_0"),
        ("transfer_to_tech", None, "call_0"),
    ]
    tech = messages[5]
    assert tech.agent_name == "tech" and str(tech.content).startswith("tech answers: [")
    assert unknown.returncode != 0 and "no agent 'legal'" in unknown.stderr
    assert moved.returncode == 0, moved.stderr
    assert answer.reply is not None and answer.reply.content == "billing answers: and my invoice?"
    assert answer.reply.agent_name == "billing"
    assert (status.agent, status.agent_stack) == ("billing", ["triage", "tech"])
    assert messages[-2].role == "user" and messages[-2].agent_name == "billing"


async def _agent_is(agents: AgentClient, session: str, name: str) -> bool:
    return (await agents.session(session).status()).agent == name


async def test_a_move_by_signal_and_the_moves_that_change_nothing(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A move to an unknown agent or to the active one is rejected, visibly; a move sent
    with the `temporal` CLI (a bare agent name) lands while idle, and tech answers."""

    def model(request: RecordedRequest) -> AssistantMessage:
        return assistant_text(f"{agent_of(request.body['messages'])}: hi")

    with ScriptedProvider(responder=model) as chat:
        spec = spec_for(chat, ["lookup_account"], swarm=swarm_section(), session={})
        async with running_worker(temporal_env, task_queue, swarm_registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "hello")
            await agents.session(session).wait(timeout=60)
            await agents.session(session).move_to_agent("nobody")
            await agents.session(session).move_to_agent("triage")

            async def rejected() -> Any:
                status = await agents.session(session).status()
                return status if len(status.rejected_signals) == 2 else None

            status = await wait_for(rejected)
            await asyncio.to_thread(
                temporal_cli,
                temporal_env,
                "workflow",
                "signal",
                "--workflow-id",
                session,
                "--name",
                "move_to_agent",
                "--input",
                json.dumps("tech"),
            )
            await wait_for(lambda: _agent_is(agents, session, "tech"))
            before = await agents.session(session).send("my router?")
            answer = await agents.session(session).wait(after=before, timeout=60)
            moved = await agents.session(session).status()
            await agents.session(session).end()
            await record_history(client.get_workflow_handle(session), "swarm_moved")
    assert status.agent == "triage"
    assert "move_to_agent: no agent 'nobody'" in status.rejected_signals[0]
    assert "triage is the active agent already" in status.rejected_signals[1]
    assert answer.reply is not None and answer.reply.content == "tech: hi"
    assert (moved.agent, moved.agent_stack) == ("tech", ["triage"])


def _paying_billing(request: RecordedRequest) -> Reply | AssistantMessage:
    """Triage hands over at once; billing streams its pay call slowly (so a kill lands
    mid-stream), then says it paid."""
    messages = request.body["messages"]
    agent = agent_of(messages)
    if agent == "triage":
        return assistant_calls(("transfer_to_billing", {"reason": "an invoice to pay"}))
    if messages[-1]["role"] != "tool":
        return slow_stream(assistant_calls(("pay", {"account": "acct-7", "amount": 30})))
    return assistant_text(f"billing: {messages[-1]['content']}")


async def test_a_worker_killed_right_after_a_handoff(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """SIGKILL while the agent just handed to is streaming its first reply: a fresh
    worker (no cache, so it replays the handoff from history) sends that agent the same
    request again, and the session ends as billing's with the payment made once."""
    address = address_of(temporal_env)
    agents = AgentClient(temporal_env.client, task_queue="swarm-crash")
    ledger = tmp_path / "ledger.txt"
    pool = WorkerPool(address, agents.task_queue, ledger, f"sqlite:///{tmp_path / 's.sqlite'}")
    swarm = {
        "default_agent": "triage",
        "agents": [
            {"name": "triage", "instructions": PROMPTS["triage"]},
            {"name": "billing", "instructions": PROMPTS["billing"], "tools": ["pay"]},
        ],
    }
    with ScriptedProvider(responder=_paying_billing) as provider:
        rules = {"end_after_reply": True, "heartbeat_timeout_seconds": KILL_HEARTBEAT_SECONDS}
        spec = spec_for(provider, swarm=swarm, session=rules)
        await asyncio.to_thread(pool.start)
        try:
            session = await agents.start(spec, "please pay my invoice")

            async def billing_streams() -> bool:
                return len(provider.requests) == 2

            await wait_for(billing_streams, timeout=60, interval=0.05)
            await asyncio.sleep(0.5)  # well inside the stream
            await asyncio.to_thread(pool.kill)
            result = await asyncio.wait_for(agents.session(session).result(), 120)
            messages = await agents.session(session).messages()
            status = await agents.session(session).status()
        finally:
            pool.stop()
    bodies = provider.bodies()
    assert [agent_of(b["messages"]) for b in bodies] == ["triage", "billing", "billing", "billing"]
    assert bodies[1] == bodies[2]  # the retried call: same agent, prompt, tools and view
    assert result.final is not None and result.final.content.startswith("billing: ")
    assert [(m.role, m.agent_name) for m in messages] == [
        ("system", "triage"),
        ("user", "triage"),
        ("assistant", "triage"),
        ("tool", "triage"),
        ("assistant", "billing"),
        ("tool", "billing"),
        ("assistant", "billing"),
    ]
    assert (status.agent, status.agent_stack) == ("billing", ["triage"])
    starts, effects = ledger_effects(ledger)
    assert (sum(starts.values()), sum(effects.values())) == (1, 1), (starts, effects)
