"""Shared provider limits: one endpoint's limit holds across every worker process and
session (one limiter workflow per endpoint keeps the count); a call without capacity waits
durably, shown in ``status`` and as events, without using up an attempt or sending a
request; a 429 slows the endpoint for everyone; tenants share the capacity in turn."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, AgentSpec
from durable_agent._cli.render import format_status
from durable_agent._contracts.capacity import LedgerState
from durable_agent._spec.endpoints import (
    LIMITER_WORKFLOW,
    CapacityRelease,
    CapacityRequest,
    ProviderEndpoint,
    ProviderLimits,
    limiter_id,
)
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.capabilities import Capabilities, load_capabilities
from durable_agent.capabilities._config_file import CapabilitiesFileError
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._models import RateLimitedModel
from durable_agent.testing._scripted_provider import RecordedRequest, Reply, error_reply
from tests.support import cli_tools
from tests.support.agent_harness import (
    record_history,
    running_worker,
    start_worker_process,
    wait_for,
)

registry = Registry([cli_tools.get_time])


def named_spec(endpoint: str, **session: Any) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "model": {
                "name": "limited-model",
                "endpoint": endpoint,
                "max_attempts": 1,
                "stream": False,
                "initial_retry_seconds": 0.1,
            },
            "tools": ["get_time"],
            "session": {"end_after_reply": True, **session},
        }
    )


#: Each test's limits by its key: a limiter's id names the limits it keeps.
LIMITS: dict[str, ProviderLimits] = {}


def capabilities(key: str, provider: ScriptedProvider, limits: ProviderLimits) -> Capabilities:
    LIMITS[key] = limits
    endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
    return Capabilities(models={key: endpoint}, limits={key: limits})


async def limiter_ledger(client: Client, key: str) -> dict[str, Any]:
    limiter = client.get_workflow_handle(limiter_id(key, LIMITS[key]))
    ledger: dict[str, Any] = await limiter.query("ledger")
    return ledger


async def failure_types(client: Client, session: str) -> list[str]:
    found = []
    async for event in client.get_workflow_handle(session).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            found.append(
                event.activity_task_failed_event_attributes.failure.application_failure_info.type
            )
    return found


async def test_a_call_without_room_waits_durably_and_sends_nothing(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Concurrency 1: while one call is at the provider, another session's call waits:
    ``status`` names the endpoint, no request leaves, no attempt is used (the model
    has one), and the wait shows as ``capacity_wait`` then ``capacity_granted``."""
    key = f"limited-{task_queue}"
    held = threading.Event()

    def answer(request: RecordedRequest) -> AssistantMessage:
        if "first" in json.dumps(request.body):
            assert held.wait(60)
        return assistant_text("done")

    with ScriptedProvider(responder=answer) as provider:
        worker_caps = capabilities(key, provider, ProviderLimits(concurrent_requests=1))
        async with running_worker(
            temporal_env, task_queue, registry, capabilities=worker_caps
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            first = await agents.start(named_spec(key), "first", owner="alice")
            await wait_for(lambda: _requests(provider, 1), timeout=60)
            second = await agents.start(named_spec(key), "second", owner="bob")
            await wait_for(lambda: _waiting_on(agents, second, key), timeout=60)
            assert len(provider.requests) == 1  # the waiting call sent nothing
            shown = format_status(await agents.session(second).status())
            assert f"waiting:        for capacity on {key} (shared limit)" in shown
            ledger = await limiter_ledger(client, key)
            assert [w["tenant"] for w in ledger["waiting"]] == ["bob"]
            # a forged "ready" only makes the call ask again: it waits on, in its place
            await client.get_workflow_handle(second).signal("capacity_ready", {"key": key})
            await wait_for(lambda: _count_waits(client, second, 2), timeout=60)
            await wait_for(lambda: _waiting_on(agents, second, key), timeout=60)
            assert len(provider.requests) == 1
            held.set()
            assert (await agents.session(first).result()).status == "done"
            result = await agents.session(second).result()
            assert result.status == "done", result.error
            assert (await agents.session(second).status()).waiting_for_capacity is None
            events = [e.type async for e in agents.session(second).follow()]
            waited = events.index("capacity_wait")
            assert events.index("capacity_granted") > waited
            assert "CapacityWait" in await failure_types(client, second)
            assert len(provider.requests) == 2
            # each call counted at its estimate (its text, and 1,024 for the output) until
            # its reply's usage (10 in, 5 out) corrected it
            await wait_for(lambda: _tokens_counted(client, key, 2 * 15), timeout=60)
            await record_history(client.get_workflow_handle(second), "capacity_wait")
            await record_history(
                client.get_workflow_handle(limiter_id(key, LIMITS[key])), "limiter"
            )


async def test_a_namespace_writer_cannot_lift_a_limit_or_free_capacity(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Anyone who can signal a workflow can reach an endpoint's limiter. An ask that
    carries larger limits is refused; a release that names leases by guess, a 429
    included, gives back nothing and slows nothing; a limiter started under the id with
    other limits, or with its book already written, serves nobody. The waiting call
    still waits, and nothing more reaches the provider than the owner's one call at a
    time."""
    key = f"limited-{task_queue}"
    held = threading.Event()

    def answer(request: RecordedRequest) -> AssistantMessage:
        if "first" in json.dumps(request.body):
            assert held.wait(60)
        return assistant_text("done")

    limits = ProviderLimits(concurrent_requests=1)
    with ScriptedProvider(responder=answer) as provider:
        worker_caps = capabilities(key, provider, limits)
        async with running_worker(
            temporal_env, task_queue, registry, capabilities=worker_caps
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            first = await agents.start(named_spec(key), "first", owner="alice")
            await wait_for(lambda: _requests(provider, 1), timeout=60)
            second = await agents.start(named_spec(key), "second", owner="bob")
            await wait_for(lambda: _waiting_on(agents, second, key), timeout=60)
            limiter = client.get_workflow_handle(limiter_id(key, limits))
            lifted = CapacityRequest(
                limits=ProviderLimits(concurrent_requests=100),
                session_id="mallory",
                run_id="r",
                hold_seconds=60,
            )
            with pytest.raises(WorkflowUpdateFailedError):
                await limiter.execute_update("acquire", [lifted])
            guesses = [CapacityRelease(lease=str(n), rate_limited=True) for n in range(10)]
            await limiter.signal("release", guesses)
            ledger = await limiter_ledger(client, key)
            assert ledger["limits"] == {"concurrent_requests": 1, **_DEFAULT_WINDOW}
            assert ledger["active"] == 1 and ledger["rate_limited"] == 0
            assert [w["session_id"] for w in ledger["waiting"]] == [second]
            forged = await client.start_workflow(
                LIMITER_WORKFLOW,
                args=[key, LedgerState(limits=ProviderLimits(concurrent_requests=100))],
                id=limiter_id(key, ProviderLimits(concurrent_requests=1, window_seconds=61)),
                task_queue=task_queue,
            )
            with pytest.raises(WorkflowFailureError):
                await forged.result()
            other = ProviderLimits(concurrent_requests=1, window_seconds=62)
            paused = LedgerState(limits=other, lease_prefix="p", paused_until=1e12)
            written = await client.start_workflow(
                LIMITER_WORKFLOW,
                args=[key, paused],
                id=limiter_id(key, other),
                task_queue=task_queue,
            )
            with pytest.raises(WorkflowFailureError):  # a book already written: no
                await written.result()
            assert await _waiting_on(agents, second, key)
            assert len(provider.requests) == 1  # the waiting call sent nothing
            held.set()
            assert (await agents.session(first).result()).status == "done"
            assert (await agents.session(second).result()).status == "done"
            await record_history(limiter, "limiter_bound")
    assert len(provider.requests) == 2


#: The window a limit counts over when the owner names none.
_DEFAULT_WINDOW = {"window_seconds": 60.0, "margin_seconds": 1.0}


async def test_a_429_slows_the_endpoint_for_everyone_and_it_recovers(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """One session's 429 with Retry-After pauses every grant on the endpoint: a second
    session's call made meanwhile waits in line (nothing sent) instead of meeting the
    provider's refusal, and the rate, halved, comes back as calls succeed."""
    key = f"limited-{task_queue}"
    refused = threading.Event()

    def answer(request: RecordedRequest) -> AssistantMessage | Reply:
        if not refused.is_set():
            refused.set()
            # 12 s: beside a second copy of the suite, 4 s had passed before the second
            # session's call reached the limiter
            return error_reply(429, "slow down", retry_after=12)
        return assistant_text("done")

    limits = ProviderLimits(requests_per_minute=100)
    with ScriptedProvider(responder=answer) as provider:
        worker_caps = capabilities(key, provider, limits)
        async with running_worker(
            temporal_env, task_queue, registry, capabilities=worker_caps
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = named_spec(key)
            spec = spec.model_copy(
                update={"model": spec.model.model_copy(update={"max_attempts": 2})}
            )
            first = await agents.start(spec, "first")
            await wait_for(lambda: _rate_limited(client, key), timeout=60)
            second = await agents.start(named_spec(key), "second")
            for session in (first, second):
                result = await agents.session(session).result()
                assert result.status == "done", result.error
            assert "CapacityWait" in await failure_types(client, second)
            assert len(provider.requests) == 3  # the refused one, and one per session
            ledger = await limiter_ledger(client, key)
            assert ledger["rate_limited"] == 1
            assert 0.5 < ledger["factor"] < 1.0  # halved, and coming back


async def _tokens_counted(client: Client, key: str, tokens: int) -> bool:
    return bool((await limiter_ledger(client, key))["tokens_in_window"] == tokens)


async def _count_waits(client: Client, session: str, count: int) -> bool:
    return (await failure_types(client, session)).count("CapacityWait") >= count


async def _rate_limited(client: Client, key: str) -> bool:
    try:
        return bool((await limiter_ledger(client, key))["rate_limited"])
    except Exception:
        return False


async def _requests(provider: ScriptedProvider, count: int) -> bool:
    return len(provider.requests) >= count


async def _waiting_on(agents: AgentClient, session: str, key: str) -> bool:
    return (await agents.session(session).status()).waiting_for_capacity == key


def two_rounds_of_tools(request: RecordedRequest) -> AssistantMessage:
    """Each session asks two rounds of tools, then answers."""
    messages = request.body["messages"] if request.body else []
    if sum(1 for m in messages if m["role"] == "assistant") < 2:
        return assistant_calls(("get_time", {"city": "Tokyo"}))
    return assistant_text("done")


@pytest.mark.timeout(600)
async def test_worker_processes_share_one_limit_and_tenants_share_it_fairly(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Three ``durable-agent worker`` processes, one endpoint limited in their owner's
    capabilities file to what the provider itself allows: the provider refuses nothing
    after the first adjustment (at most one 429, which its call's second attempt
    covers), every session completes, and bob (3 sessions) gets as many calls through
    as alice (10 sessions) while both wait: in turn, not first come first served (which
    would give bob 3 of 13).
    The margin is the owner's cover for the time from the limiter's count to the
    request's arrival: 5 s, as on a machine loaded past its cores (two copies of this
    suite on two cores), where 1 s and then 2.5 s let a late request past the
    provider's window. The one refusal allowed is retried, not the end of a session."""
    key = f"limited-{task_queue}"
    rule = RateLimitedModel(requests=4, window=2.0, answer=two_rounds_of_tools)
    shared = ProviderLimits(requests_per_minute=4, window_seconds=2.0, margin_seconds=5.0)
    LIMITS[key] = shared
    with ScriptedProvider(responder=rule) as provider:
        caps = tmp_path / "capabilities.json"
        caps.write_text(
            json.dumps(
                {
                    "models": {key: {"base_url": provider.base_url, "api_key_env": None}},
                    "limits": {key: shared.model_dump(exclude_defaults=True)},
                }
            )
        )
        workers = [
            start_worker_process(
                temporal_env, task_queue, "--capabilities", str(caps), trust_specs=False
            )
            for _ in range(3)
        ]
        try:
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            owners = ["alice"] * 10 + ["bob"] * 3
            spec = named_spec(key)
            spec = spec.model_copy(
                update={"model": spec.model.model_copy(update={"max_attempts": 2})}
            )
            sessions = [
                await agents.start(spec, f"{owner} session {k}", owner=owner)
                for k, owner in enumerate(owners)
            ]
            results = await asyncio.gather(*(agents.session(s).result() for s in sessions))
            ledger = await limiter_ledger(temporal_env.client, key)
        finally:
            for worker in workers:
                worker.terminate()
                worker.wait(15)
    assert [r.status for r in results] == ["done"] * len(sessions), [r.error for r in results]
    assert len(rule.refused) <= 1, rule.refused
    assert len(rule.accepted) == 3 * len(sessions)
    bobs = [k for k, (_, tenant) in enumerate(rule.accepted) if tenant == "bob"]
    while_both = Counter(tenant for _, tenant in rule.accepted[bobs[0] : bobs[-1] + 1])
    assert while_both["bob"] >= 0.7 * while_both["alice"], while_both
    assert ledger["waited"] > 0 and ledger["waiting"] == []


def test_limits_are_the_owners_and_name_registered_endpoints(tmp_path: Path) -> None:
    limits = ProviderLimits(requests_per_minute=10)
    openai = ProviderEndpoint()
    local = ProviderEndpoint(base_url="http://127.0.0.1:9/v1", api_key_env=None)
    caps = Capabilities(
        models={"openai": openai, "local": local},
        limits={"openai": limits, "openai/gpt-4o": ProviderLimits(concurrent_requests=2)},
    )
    assert caps.limits_for(openai, "gpt-4o-mini") == ("openai", limits)
    assert caps.limits_for(openai, "gpt-4o") == ("openai/gpt-4o", caps.limits["openai/gpt-4o"])
    assert caps.limits_for(local, "gpt-4o") is None
    # an inline copy of a registered endpoint counts against its limit; a name is its own
    assert caps.limits_for(ProviderEndpoint(), "o3") == ("openai", limits)
    twins = Capabilities(models={"a": local, "b": local}, limits={"b": limits})
    assert twins.limits_for("a", "m") is None and twins.limits_for("b", "m") == ("b", limits)
    with pytest.raises(ValueError, match="limits 'mistral': no registered model endpoint"):
        Capabilities(models={"openai": openai}, limits={"mistral": limits})
    bad = tmp_path / "caps.toml"
    bad.write_text(
        '[models.openai]\nbase_url = "https://api.openai.com/v1"\n'
        "[limits.openai]\nrequests_per_mimute = 5\n"
    )
    with pytest.raises(CapabilitiesFileError, match=r"limits\.openai\.requests_per_mimute"):
        load_capabilities(bad)


async def test_a_sub_agents_calls_count_under_its_parents_owner(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A sub-agent is a child session: it inherits its parent's owner, so a tenant cannot
    reach another share of a limited endpoint by delegating."""
    key = f"limited-{task_queue}"

    def answer(request: RecordedRequest) -> AssistantMessage:
        messages = request.body["messages"] if request.body else []
        if messages[0]["content"] == "You research.":
            return assistant_text("42")
        if any(m["role"] == "tool" for m in messages):
            return assistant_text("The researcher says 42.")
        return assistant_calls(("researcher", {"task": "the answer"}))

    with ScriptedProvider(responder=answer) as provider:
        child = named_spec(key).model_dump()
        child["instructions"], child["tools"] = "You research.", []
        spec = AgentSpec.model_validate(
            {
                **named_spec(key).model_dump(),
                "tools": [],
                "agents": [{"name": "researcher", "description": "Researches", "spec": child}],
            }
        )
        caps = capabilities(key, provider, ProviderLimits(requests_per_minute=100))
        async with running_worker(temporal_env, task_queue, registry, capabilities=caps) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "ask", owner="alice")
            assert (await agents.session(session).result()).status == "done"
            children = await started_children(client, session)
            assert [await agents.session(child).owner() for child in children] == ["alice"]
            assert await call_tenants(client, children[0]) == ["alice"]
            assert await call_tenants(client, session) == ["alice", "alice"]
    assert len(provider.requests) == 3


async def started_children(client: Client, session: str) -> list[str]:
    """The ids of the child sessions ``session`` started (from its history)."""
    found = []
    async for event in client.get_workflow_handle(session).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
            attributes = event.child_workflow_execution_started_event_attributes
            found.append(attributes.workflow_execution.workflow_id)
    return found


async def call_tenants(client: Client, session: str) -> list[str | None]:
    """The tenant each ``call_model`` of the session carried (as history holds it)."""
    found = []
    async for event in client.get_workflow_handle(session).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            if attributes.activity_type.name == "call_model":
                call = json.loads(attributes.input.payloads[0].data)
                found.append(call.get("tenant"))
    return found
