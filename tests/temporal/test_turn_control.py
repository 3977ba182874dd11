"""Steering a live session on the real server: ``cancel`` (a model call, a tool batch),
``flush``, ``budget``, through the command line as a person would, and guardrails on
user messages and answers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.boundary import SessionStatus
from durable_agent._spec.document import ModelPrice
from durable_agent._spec.tools import ToolContext
from durable_agent._tools.functions import tool
from durable_agent._tools.hooks import guardrail
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import (
    AssistantMessage,
    FlushMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest, Reply, chat_stream_events
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import (
    cli_json,
    record_history,
    running_worker,
    spec_for,
    wait_for,
)

registry = Registry()


@tool(registry=registry)
async def slow_lookup(key: str) -> str:
    """Look a key up (slowly)."""
    await asyncio.sleep(60)
    return f"{key}: found"


@tool(registry=registry)
async def quick_lookup(key: str) -> str:
    """Look a key up."""
    await asyncio.sleep(1)
    return f"{key}: found"


@tool(registry=registry, approval="always")
def wire_money(amount: int) -> str:
    """Send money (a person approves)."""
    return f"sent {amount}"


@tool(registry=registry)
def ask_expert(question: str, ctx: ToolContext) -> str:
    """Ask an expert agent (a sub-agent that spends model tokens)."""
    ctx.report_usage(Usage(prompt_tokens=300, completion_tokens=100, total_tokens=400))
    return f"the expert says yes to {question}"


@guardrail(registry=registry)
def no_ssn(text: str) -> str | None:
    return "contains an SSN" if "SSN" in text else None


@guardrail(registry=registry)
def polite(text: str) -> str | None:
    return "impolite answer" if "darn" in text else None


@guardrail(registry=registry)
def broken(text: str) -> str | None:
    raise RuntimeError("the PII service is down")


def slow_stream(message: AssistantMessage, seconds: float) -> Reply:
    events = chat_stream_events(message)
    chunks = tuple(f"data: {json.dumps(e)}\n\n".encode() for e in events)
    return Reply(sse=True, chunks=(*chunks, b"data: [DONE]\n\n"), delay=seconds / len(chunks))


async def status_of(agents: AgentClient, session: str) -> SessionStatus:
    return await agents.session(session).status()


async def idle(agents: AgentClient, session: str) -> SessionStatus:
    async def check() -> SessionStatus | None:
        status = await agents.session(session).status()
        return status if status.phase == "idle" and not status.queued_messages else None

    found: SessionStatus = await wait_for(check, timeout=30)
    return found


async def test_cancel_stops_a_model_call_and_a_tool_batch_and_the_session_goes_on(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    address = address_of(temporal_env)
    script = [
        slow_stream(assistant_text("a long answer nobody waits for"), 60),
        assistant_calls(("slow_lookup", {"key": "a"}), ("slow_lookup", {"key": "b"})),
        assistant_text("fine, something else then"),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["slow_lookup"], session={"heartbeat_timeout_seconds": 2})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "tell me everything")
            await wait_for(lambda: _true(len(provider.requests) == 1))
            cancel = await acli("cancel", session, "--reason", "too slow", address=address)
            assert cancel.returncode == 0, cancel.stderr
            status = await idle(agents, session)
            assert status.last_error is not None
            assert status.last_error.startswith("turn cancelled by ")
            assert status.last_error.endswith(": too slow")
            after_model = await agents.session(session).messages()
            assert [m.role for m in after_model] == ["user"], "nothing joined the array"

            await agents.session(session).send("look up a and b")
            await wait_for(lambda: _phase_is(agents, session, "running_tools"))
            await asyncio.sleep(0.5)
            await agents.session(session).cancel_turn(by="tester")
            await idle(agents, session)
            batch = await agents.session(session).messages()
            results = [m for m in batch if isinstance(m, ToolMessage)]
            assert [r.is_error for r in results] == [True, True]
            assert all("not completed, turn cancelled by tester" in r.content for r in results), [
                r.content for r in results
            ]
            assert len(provider.requests) == 2, "the model was not asked after the cancel"

            # with no turn running, a cancel changes nothing, visibly
            await agents.session(session).cancel_turn(by="tester")
            rejected = await wait_for(lambda: _rejected(agents, session))
            assert rejected[-1] == "cancel_turn: no turn is running"

            await agents.session(session).send("never mind")
            await idle(agents, session)
            messages = await agents.session(session).messages()
            history = await cli_json(temporal_env, "workflow", "show", "--workflow-id", session)
            await record_history(client.get_workflow_handle(session), "cancellation")
    assert messages[-1].content == "fine, something else then"
    sent = provider.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "user", "assistant", "tool", "tool", "user"]
    assert sent[3]["content"].startswith("Error calling 'slow_lookup': not completed")
    events = [e["eventType"] for e in history["events"]]
    assert events.count("EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED") == 3  # model + 2 tools


async def _true(value: bool) -> bool:
    return value


async def _phase_is(agents: AgentClient, session: str, phase: str) -> bool:
    return (await agents.session(session).status()).phase == phase


async def _rejected(agents: AgentClient, session: str) -> list[str]:
    return (await agents.session(session).status()).rejected_signals


def _roles(request: RecordedRequest) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in request.body["messages"]]


async def test_cancel_and_flush_while_approvals_wait_across_continue_as_new(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_calls(("wire_money", {"amount": 5}), ("wire_money", {"amount": 7}))]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["wire_money"], session={"continue_as_new_after_events": 20})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "pay both")
            await wait_for(lambda: _phase_is(agents, session, "awaiting_approval"))
            await agents.session(session).flush(by="ops")  # waits for the turn to end
            for k in range(4):  # signals that change nothing grow history past the limit
                await agents.temporal.get_workflow_handle(session).signal(
                    "approve", {"approval_id": f"bogus-{k}"}
                )
            status = await wait_for(lambda: _carried(agents, session))
            assert status.flushes_pending == 1 and len(status.pending_approvals) == 2
            await agents.session(session).cancel_turn(by="ops", reason="wrong account")
            await wait_for(lambda: _flushed(agents, session, 1))
            status = await agents.session(session).status()
            messages = await agents.session(session).messages()
    assert status.phase == "idle" and not status.pending_approvals
    assert status.last_error == "turn cancelled by ops: wrong account"
    assert [m.role for m in messages] == ["user", "assistant", "tool", "tool", "flush"]
    assert all(
        isinstance(m, ToolMessage) and m.is_error and "turn cancelled by ops" in m.content
        for m in messages[2:4]
    )
    assert len(provider.requests) == 1, "nothing ran, the model was not asked again"


async def _carried(agents: AgentClient, session: str) -> SessionStatus | None:
    status = await agents.session(session).status()
    return status if status.runs >= 2 and status.phase == "awaiting_approval" else None


async def test_flush_resets_what_requests_start_from_and_waits_for_the_turn(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    address = address_of(temporal_env)
    script = [
        assistant_text("Paris is in France."),
        assistant_calls(("quick_lookup", {"key": "rome"})),
        assistant_text("Rome: found."),
        assistant_text("Hello again."),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["quick_lookup"], instructions="Be brief.", session={})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "where is Paris?")
            await idle(agents, session)
            flushed = await acli("flush", session, "--reason", "new topic", address=address)
            assert flushed.returncode == 0, flushed.stderr
            await wait_for(lambda: _flushed(agents, session, 1))

            await agents.session(session).send("look up rome")
            await wait_for(lambda: _phase_is(agents, session, "running_tools"))
            await agents.session(session).flush(by="tester")  # mid-turn: applied after the answer
            status = await agents.session(session).status()
            assert status.flushes_pending == 1
            await wait_for(lambda: _flushed(agents, session, 2))
            await agents.session(session).send("hello")
            await idle(agents, session)
            messages = await agents.session(session).messages()
            status = await agents.session(session).status()
            shown = await acli("history", session, address=address)
            handle = client.get_workflow_handle(session)
            await record_history(handle, "flush")
    roles = [m.role for m in messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "flush",
        "user",
        "assistant",
        "tool",
        "assistant",
        "flush",
        "user",
        "assistant",
    ]
    first_flush = messages[3]
    assert isinstance(first_flush, FlushMessage)
    assert first_flush.reason == "new topic" and first_flush.by and first_flush.mode == "user"
    # after the first flush: the system message, then the new turn, whole
    assert _roles(provider.requests[1]) == [("system", "Be brief."), ("user", "look up rome")]
    assert [r for r, _ in _roles(provider.requests[2])] == ["system", "user", "assistant", "tool"]
    # after the second: the system message and the newest message only
    assert _roles(provider.requests[3]) == [("system", "Be brief."), ("user", "hello")]
    assert status.compacted == 6 and status.flushes_pending == 0
    lines = shown.stdout.splitlines()
    assert any("history flushed by" in line and "new topic" in line for line in lines)
    compacted = [line for line in lines if line.endswith("(compacted)")]
    assert len(compacted) == 6, shown.stdout  # what the flushes left behind


async def _flushed(agents: AgentClient, session: str, count: int) -> bool:
    messages = await agents.session(session).messages()
    return sum(isinstance(m, FlushMessage) for m in messages) == count


async def test_guardrails_block_a_message_and_an_answer_and_keep_both(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_text("darn, the weather is bad"), assistant_text("It is raining.")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(
            provider, [], session={}, guardrails={"input": ["no_ssn"], "output": ["polite"]}
        )
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "my SSN is 123-45-6789, look it up")
            status = await idle(agents, session)
            assert status.last_error == "input guardrail no_ssn: contains an SSN"
            assert not provider.requests, "the model never saw the message"

            await agents.session(session).send("what is the weather?")
            status = await wait_for(lambda: _errored(agents, session, "output guardrail"))
            assert status.last_error == "output guardrail polite: impolite answer"
            await agents.session(session).send("and now?")
            await idle(agents, session)
            messages = await agents.session(session).messages()
            handle = client.get_workflow_handle(session)
            await record_history(handle, "guardrails")
    blocked_in, asked, blocked_out, again, answer = messages
    assert isinstance(blocked_in, UserMessage) and blocked_in.blocked == "contains an SSN"
    assert isinstance(blocked_out, AssistantMessage) and blocked_out.blocked == "impolite answer"
    assert isinstance(asked, UserMessage) and isinstance(again, UserMessage)
    assert answer.content == "It is raining."
    # blocked messages stay in the array and are never sent
    assert _roles(provider.requests[1]) == [
        ("user", "what is the weather?"),
        ("user", "and now?"),
    ]


async def _errored(agents: AgentClient, session: str, prefix: str) -> SessionStatus | None:
    status = await agents.session(session).status()
    ok = status.phase == "idle" and (status.last_error or "").startswith(prefix)
    return status if ok else None


async def test_a_guardrail_that_keeps_failing_fails_the_turn_closed(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("never sent")]) as provider:
        spec = spec_for(provider, [], guardrails={"input": ["broken"], "max_attempts": 2})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "hello")
            result = await asyncio.wait_for(agents.session(session).result(), 30)
            history = await cli_json(temporal_env, "workflow", "show", "--workflow-id", session)
    assert result.status == "failed" and result.stop_reason == "guardrail"
    assert result.error == (
        "input guardrail: the guardrail failed: RuntimeError: the PII service is down"
    )
    assert not provider.requests
    scheduled = [
        e
        for e in history["events"]
        if e["eventType"] == "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"
        and e["activityTaskScheduledEventAttributes"]["activityType"]["name"] == "check_guardrails"
    ]
    assert len(scheduled) == 2, "max_attempts tries, a durable timer between"


async def test_a_guardrail_no_worker_loaded_fails_the_session_at_start(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("never sent")]) as provider:
        spec = spec_for(provider, [], guardrails={"output": ["not_loaded"]})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "hello")
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(agents.session(session).result(), 30)
    assert "guardrails that no worker has loaded: not_loaded" in str(failed.value.cause)
    assert not provider.requests


async def test_a_token_budget_stops_the_session_and_the_cli_changes_it(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    address = address_of(temporal_env)
    script = [assistant_text(f"answer {k}") for k in range(1, 6)]  # 15 tokens each
    with ScriptedProvider(script) as provider:
        spec = spec_for(
            provider,
            [],
            session={"continue_as_new_after_events": 20},
            stop={"max_total_tokens": 1000},
        )
        price = ModelPrice(input_per_million=2.0, output_per_million=8.0)
        spec = spec.model_copy(update={"model": spec.model.model_copy(update={"price": price})})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "one")
            await idle(agents, session)
            await agents.session(session).send("two")
            await idle(agents, session)
            empty = await acli("budget", session, address=address)
            lowered = await acli("budget", session, "--max-total-tokens", "40", address=address)
            assert lowered.returncode == 0, lowered.stderr
            await agents.session(session).send("three")  # 30 spent: allowed, 45 after it
            await idle(agents, session)
            await agents.session(session).send("four")  # 45 of 40: the session stops
            result = await asyncio.wait_for(agents.session(session).result(), 30)
            status = await agents.session(session).status()
    assert empty.returncode == 2 and "give --max-total-tokens" in empty.stderr
    assert result.status == "done" and result.stop_reason == "budget"
    assert result.error == "token budget spent: 45 of 40 tokens"
    assert len(provider.requests) == 3
    assert status.runs > 1, "the budget was counted across continue-as-new"
    assert status.budget is not None
    assert status.budget.total_tokens == 45 and status.budget.max_total_tokens == 40
    assert status.budget.cost_usd is not None
    assert abs(status.budget.cost_usd - 3 * (10 * 2.0 + 5 * 8.0) / 1e6) < 1e-12


async def test_tokens_a_tool_spends_on_a_sub_agent_count_toward_the_budget(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("ask_expert", {"question": "a"}), ("ask_expert", {"question": "b"})),
        assistant_text("both said yes"),
        assistant_text("never asked"),
    ]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["ask_expert"], session={}, stop={"max_total_tokens": 820})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "ask twice")
            await idle(agents, session)
            status = await agents.session(session).status()
            await agents.session(session).send("and again")
            result = await asyncio.wait_for(agents.session(session).result(), 30)
            messages = await agents.session(session).messages()
    assert status.usage.total_tokens == 15 + 2 * 400 + 15
    experts = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.usage.total_tokens for m in experts if m.usage] == [400, 400]
    assert result.stop_reason == "budget" and len(provider.requests) == 2
    # kept on the result, never sent to the model
    assert "usage" not in json.dumps(provider.requests[1].body["messages"])


async def test_bad_budget_signals_are_rejected_visibly(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("hi")]) as provider:
        spec = spec_for(provider, [], session={})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "hello")
            await idle(agents, session)
            await agents.session(session).set_budget(max_cost_usd=1.0)  # no price to count by
            handle = client.get_workflow_handle(session)
            await handle.signal("set_budget", {"max_total_tokens": -5})
            rejected = await wait_for(lambda: _rejected_count(agents, session, 2))
    assert rejected[0] == "set_budget: max_cost_usd needs a price for the model (spec or worker)"
    assert rejected[1].startswith("set_budget: unreadable signal")


async def _rejected_count(agents: AgentClient, session: str, count: int) -> Any:
    found = await _rejected(agents, session)
    return found if len(found) >= count else None
