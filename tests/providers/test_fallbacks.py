"""Durable fallback chains (``model.fallbacks``): a model that fails in a way another
may not (an overload, a rate limit, a 5xx) hands the call to the next model of the chain,
each hop its own recorded activity on its own endpoint and API (Chat Completions to
Anthropic and back, the same array translated for each); the answer says which model
gave it. An authentication or a request error fails as it would without a chain, and a
worker admits a chain only as far as it registered the endpoints."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, AgentSpec
from durable_agent._spec.document import ModelPrice
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, Usage
from durable_agent.capabilities import Capabilities
from durable_agent.capabilities._admission import admission_problems
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import error_reply, json_reply
from tests.support import cli_tools
from tests.support.agent_harness import (
    KILL_HEARTBEAT_SECONDS,
    record_history,
    running_worker,
    spec_for,
    start_worker_process,
    wait_for,
)

registry = Registry([cli_tools.get_time])


def model(provider: ScriptedProvider, name: str, api: str = "chat") -> dict[str, Any]:
    endpoint = {"base_url": provider.base_url, "api": api, "api_key_env": None}
    return {"name": name, "endpoint": endpoint, "max_attempts": 1, "stream": False}


def chain(first: ScriptedProvider, *hops: tuple[ScriptedProvider, str, str]) -> AgentSpec:
    base = spec_for(first, ["get_time"], instructions="Be brief.").model_dump()
    base["model"] = {
        **model(first, "model-a"),
        "fallbacks": [model(provider, name, api) for provider, name, api in hops],
    }
    return AgentSpec.model_validate(base)


def anthropic_tool_use() -> Any:
    return json_reply(
        {
            "type": "message",
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_time",
                    "input": {"city": "Tokyo"},
                }
            ],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 30, "output_tokens": 9},
        }
    )


async def scheduled(client: Any, session_id: str) -> list[str]:
    handle = client.get_workflow_handle(session_id)
    names = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == "call_model":
                names.append(json.loads(event.user_metadata.summary.data))
    return names


async def test_a_three_hop_chain_across_chat_and_anthropic_answers_from_the_hop_that_works(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with (
        ScriptedProvider([error_reply(503, "overloaded"), assistant_text("It is 22:00")]) as a,
        ScriptedProvider([error_reply(429, "slow down")]) as b,
        ScriptedProvider([anthropic_tool_use()]) as c,
    ):
        spec = chain(a, (b, "model-b", "chat"), (c, "model-c", "anthropic"))
        data = spec.model_dump()
        data["model"]["fallbacks"][1]["price"] = {"input_per_million": 3, "output_per_million": 15}
        spec = AgentSpec.model_validate(data)
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "time in Tokyo?")
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
            calls = await scheduled(client, sid)
            await record_history(client.get_workflow_handle(sid), "fallback_chain")
    assert result.status == "done" and result.final is not None
    assert result.final.content == "It is 22:00" and result.final.model is None  # model-a
    [asked] = [m for m in messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert asked.model == "model-c"  # the third hop answered the first call
    # what each model spent (the 503 and the 429 billed nothing), model-c at its price
    assert set(result.spend) == {"model-a", "model-c"}
    spent = result.spend["model-c"]
    assert spent.calls == 1 and (spent.usage.prompt_tokens, spent.usage.completion_tokens) == (
        30,
        9,
    )
    assert spent.cost_usd is not None and abs(spent.cost_usd - (30 * 3 + 9 * 15) / 1e6) < 1e-12
    assert result.spend["model-a"].cost_usd is None  # no price given for it
    # each hop its own recorded activity; the next call starts from the first model again
    assert [c.split(" turn")[0] for c in calls] == [
        "call_model model-a",
        "call_model model-b",
        "call_model model-c",
        "call_model model-a",
    ]
    # the same array, translated for each hop's API
    assert c.requests[0].path.endswith("/messages")
    anthropic = c.bodies()[0]
    assert anthropic["system"] == "Be brief." and anthropic["tools"][0]["input_schema"]
    assert b.bodies()[0]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert [m["role"] for m in a.bodies()[1]["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]
    assert "model" not in a.bodies()[1]["messages"][2]  # the record stays local


async def test_an_authentication_error_fails_the_turn_without_trying_the_chain(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with (
        ScriptedProvider([error_reply(401, "bad key")]) as a,
        ScriptedProvider([assistant_text("never asked")]) as b,
    ):
        spec = chain(a, (b, "model-b", "chat"))
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            result = await agents.session(await agents.start(spec, "hi")).result()
    assert result.status == "failed" and "bad key" in (result.error or "")
    assert len(b.requests) == 0  # no request was made to the fallback


async def test_a_chain_is_admitted_only_as_far_as_the_worker_registered_its_endpoints() -> None:
    with ScriptedProvider() as a, ScriptedProvider() as b:
        spec = chain(a, (b, "model-b", "chat"))
        problems = await admission_problems(spec, Capabilities(), "queue", Registry())
    assert any(p.startswith("model.fallbacks[0].endpoint") for p in problems), problems
    assert any(p.startswith("model.endpoint") for p in problems), problems


async def test_a_worker_killed_during_a_hop_costs_a_retry_of_that_hop_not_a_move(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A lost worker is infrastructure: the hop's activity is retried elsewhere, on the
    same model; the chain neither moves on nor starts over."""
    released = threading.Event()
    held = dataclasses.replace(json_reply({"choices": []}), hold=released, sse=True, chunks=(b"",))
    with (
        # (a loaded machine may ask model-a's call again, lost work: it hears the same)
        ScriptedProvider([error_reply(503, "overloaded")] * 3) as a,
        ScriptedProvider([held, assistant_text("from b")]) as b,
        ScriptedProvider([assistant_text("never asked")]) as c,
    ):
        spec = chain(a, (b, "model-b", "chat"), (c, "model-c", "chat"))
        # the project's default heartbeat: a shorter one, on a machine running the whole
        # suite, lets the server time out model-a's call before its failure is heard,
        # again and again (lost work each time), and the chain never moves on
        spec = spec.model_copy(
            update={
                "session": spec.session.model_copy(
                    update={"heartbeat_timeout_seconds": 3 * KILL_HEARTBEAT_SECONDS}
                )
            }
        )
        first = await asyncio.to_thread(start_worker_process, temporal_env, task_queue)
        second = None
        try:
            agents = AgentClient(temporal_env.client, task_queue=task_queue, query_timeout=60)
            sid = await agents.start(spec, "hi")
            await wait_for(lambda: _asked(b), timeout=60)
            first.kill()
            await asyncio.to_thread(first.wait)
            released.set()
            second = await asyncio.to_thread(start_worker_process, temporal_env, task_queue)
            result = await asyncio.wait_for(agents.session(sid).result(), 120)
            calls = await scheduled(temporal_env.client, sid)
        finally:
            for worker in (first, second):
                if worker is not None:
                    worker.kill()
    assert result.final is not None and result.final.content == "from b"
    assert result.final.model == "model-b"
    assert [c.split(" turn")[0] for c in calls] == ["call_model model-a", "call_model model-b"]
    # (a's one call may be asked again by Temporal when a loaded machine's heartbeat is
    # late: lost work, the same scheduled call, never a move; ``calls`` shows the moves)
    assert len(a.requests) >= 1 and len(b.requests) == 2 and len(c.requests) == 0


async def _asked(provider: ScriptedProvider) -> bool:
    return len(provider.requests) >= 1


async def test_an_attempt_billed_before_its_worker_was_lost_is_counted(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The provider answered (and billed) the first attempt; its worker died before
    reporting. The retry's reply carries the lost attempt's usage, and the budget and
    the per-model spend count both, the lost attempt's cached reads at their price."""
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    first_usage = Usage(prompt_tokens=100, completion_tokens=20, total_tokens=120, cached_tokens=64)
    kept_usage = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
    script = [assistant_text("lost", usage=first_usage), assistant_text("kept", usage=kept_usage)]
    price = ModelPrice(
        input_per_million=1_000, cached_input_per_million=100, output_per_million=2_000
    )
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with ScriptedProvider(script) as provider:
        spec = spec_for(
            provider,
            hooks={"reply": ["hold_while_flagged"]},
            session={"heartbeat_timeout_seconds": KILL_HEARTBEAT_SECONDS, "end_after_reply": True},
        )
        spec = spec.model_copy(update={"model": spec.model.model_copy(update={"price": price})})
        held = ("--transcript-store", store)
        first = await asyncio.to_thread(
            start_worker_process, temporal_env, task_queue, *held, DA_TEST_HOLD_FIFO=str(fifo)
        )
        second = None
        try:
            agents = AgentClient(temporal_env.client, task_queue=task_queue, query_timeout=60)
            sid = await agents.start(spec, "hi")
            await wait_for(lambda: _exists(Path(f"{fifo}.reached")), timeout=60)
            first.kill()
            await asyncio.to_thread(first.wait)
            second = await asyncio.to_thread(start_worker_process, temporal_env, task_queue, *held)
            result = await asyncio.wait_for(agents.session(sid).result(), 120)
        finally:
            for worker in (first, second):
                if worker is not None:
                    worker.kill()
    assert result.final is not None and result.final.content == "kept"
    assert result.final.voided_usage == first_usage
    assert result.usage.total_tokens == 120 + 15  # the lost attempt's and the kept one's
    assert result.spend["scripted-model"].calls == 2
    assert len(provider.requests) == 2
    # what the provider billed, to the token: both attempts, cached reads at their price
    spent = result.spend["scripted-model"]
    assert spent.usage.cached_tokens == 64
    assert spent.cost_usd == pytest.approx(
        price.cost_usd(first_usage) + price.cost_usd(kept_usage), abs=1e-12
    )


async def _exists(path: Path) -> bool:
    return path.exists()


async def test_a_price_the_worker_registers_counts_where_the_spec_gives_none(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The worker's price list prices the spec's model: its spend, and a cost budget the
    spec could not have had without one (a worker without the price refuses it)."""
    price = ModelPrice(input_per_million=10_000, output_per_million=20_000)  # 0.2 $ a call
    script = [
        assistant_calls(("get_time", {"city": "NYC"})),
        assistant_calls(("get_time", {"city": "Tokyo"})),
        assistant_text("never asked: the budget is spent before"),
    ]
    with ScriptedProvider(script) as provider:
        data = spec_for(provider, ["get_time"]).model_dump()
        data["stop"] = {"max_cost_usd": 0.3}
        spec = AgentSpec.model_validate(data)  # no price in the spec: valid
        priced = Capabilities.development(prices={"scripted-model": price})
        async with running_worker(temporal_env, task_queue, registry, capabilities=priced) as c:
            agents = AgentClient(c, task_queue=task_queue)
            result = await agents.session(await agents.start(spec, "time?")).result()
        async with running_worker(temporal_env, f"{task_queue}-bare", registry) as c:
            bare = AgentClient(c, task_queue=f"{task_queue}-bare")
            with pytest.raises(WorkflowFailureError) as refused:
                await bare.session(await bare.start(spec, "time?")).result()
    assert result.stop_reason == "budget"  # two calls: 0.4 $, over the 0.3 $ budget
    assert result.spend["scripted-model"].cost_usd == pytest.approx(0.4)
    assert "needs a price for 'scripted-model'" in str(refused.value.cause)
    assert len(provider.requests) == 2
