"""Provider faults over real HTTP: transient ones are retried by the activity's policy and
the turn completes, with exactly as many requests as the policy says; permanent ones end
the session `failed` with the provider's words, keeping everything before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent._contracts.boundary import SessionStatus
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text, error_reply
from durable_agent.testing._scripted_provider import Reply, chat_stream_events, sse_reply
from tests.support.agent_harness import (
    query_messages,
    record_history,
    running_worker,
    spec_for,
    start_session,
    timer_durations,
)

registry = Registry()


@tool(registry=registry)
def ping(host: str) -> str:
    """Ping a host."""
    return f"{host} is up"


def _stream_cut() -> Reply:
    return sse_reply(chat_stream_events(assistant_text("half an answ")), cut=True)


TRANSIENT: dict[str, Reply] = {
    "429 with Retry-After": error_reply(429, "rate limited", retry_after=1),
    "500": error_reply(500, "internal error"),
    "502": error_reply(502, "bad gateway"),
    "503": error_reply(503, "overloaded"),
    "connection reset": Reply(reset=True),
    "read timeout": Reply(sse=True, chunks=(b": waiting\n\n",), delay=3.0),
    "stream cut before [DONE]": _stream_cut(),
    "empty stream": Reply(sse=True, chunks=()),
    "malformed JSON in a chunk": sse_reply([b"data: {not json at all\n\n"]),
}


def _spec(provider: ScriptedProvider, **kw: Any) -> Any:
    spec = spec_for(provider, ["ping"], max_attempts=3, **kw)
    endpoint = spec.model.endpoint.model_copy(update={"read_timeout": 1.0})
    return spec.model_copy(update={"model": spec.model.model_copy(update={"endpoint": endpoint})})


@pytest.mark.parametrize("fault", list(TRANSIENT), ids=list(TRANSIENT))
async def test_transient_faults_are_retried_once_and_the_turn_completes(
    temporal_env: WorkflowEnvironment, task_queue: str, fault: str
) -> None:
    script = [TRANSIENT[fault], assistant_text("all good")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            handle = await start_session(client, task_queue, _spec(provider), "status?")
            result = await handle.result()
            timers = await timer_durations(handle)
            if fault == "503":  # the model's own failure, retried on a durable timer
                await record_history(handle, "model_attempt_retried")
    assert result.status == "done" and result.final and result.final.content == "all good"
    assert len(provider.requests) == 2, f"{fault}: {len(provider.requests)} requests"
    if fault == "429 with Retry-After":  # the provider's 1 s, as the durable timer's
        assert timers == [timedelta(seconds=1)], timers
    else:  # the endpoint's own backoff: a timer all the same
        assert len(timers) == 1 and timers[0] > timedelta(0), timers


async def test_a_fault_that_persists_stops_at_max_attempts(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [error_reply(503, "still overloaded")] * 5
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            handle = await start_session(client, task_queue, _spec(provider), "status?")
            result = await handle.result()
    assert len(provider.requests) == 3  # max_attempts, no more
    assert result.status == "failed" and result.error and "still overloaded" in result.error


@pytest.mark.parametrize(
    ("status", "text"),
    [(400, "Invalid 'messages[2].content'"), (401, "Incorrect API key"), (404, "no such model")],
)
async def test_permanent_faults_fail_the_session_with_the_providers_words(
    temporal_env: WorkflowEnvironment, task_queue: str, status: int, text: str
) -> None:
    script = [assistant_calls(("ping", {"host": "db"})), error_reply(status, text)]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            handle = await start_session(client, task_queue, _spec(provider), "ping db")
            result = await handle.result()
            status_now: SessionStatus = await handle.query("status", result_type=SessionStatus)
            messages = await query_messages(handle)
    assert len(provider.requests) == 2  # the good turn, then one failed request: no storm
    assert result.status == "failed" and result.error
    assert str(status) in result.error and text in result.error
    assert status_now.phase == "failed" and status_now.last_error == result.error
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].content == "db is up"  # everything before is kept
    assert messages[-1].is_error and messages[-1].error == result.error


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_reply_too_large_for_history_fails_within_max_attempts(
    temporal_env: WorkflowEnvironment, task_queue: str, stream: bool
) -> None:
    """A reply over what one activity result holds is a model attempt's failure (the
    next attempt may answer shorter), never lost work retried for ever: at most
    ``max_attempts`` requests, and the session's error says why. Streamed, reading
    stops as soon as the reply passes the limit."""
    script = [assistant_text("x" * 3_000_000)] * 4
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            spec = spec_for(provider, ["ping"], max_attempts=2)
            spec = spec.model_copy(
                update={"model": spec.model.model_copy(update={"stream": stream})}
            )
            handle = await start_session(client, task_queue, spec, "say a lot")
            result = await handle.result()
            status_now: SessionStatus = await handle.query("status", result_type=SessionStatus)
    assert len(provider.requests) == 2, "max_attempts requests, no more"
    words = "bytes: not read further" if stream else "over the 1500000 one activity"
    assert result.status == "failed" and result.error and words in result.error, result.error
    assert status_now.last_error is not None and words in status_now.last_error
