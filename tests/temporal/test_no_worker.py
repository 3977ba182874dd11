"""A session no worker answers for: the error says which worker is missing (none ever
came for the session's queue, or the workers stopped or are busy), from what the
server knows of who asked that queue for work, not a guess."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import Agent, AgentClient, NoWorkerError
from durable_agent._spec.document import ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.support.agent_harness import spec_for, start_worker_process


async def test_a_queue_no_worker_ever_served_is_named_as_such(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Nobody ever asked the session's queue for work: the error says so, names the
    session's queue (not the client's: the session was started on another) and how to
    start a worker, and the model was never called."""
    with ScriptedProvider([assistant_text("never asked")]) as provider:
        starter = AgentClient(temporal_env.client, task_queue=task_queue)
        sid = await starter.start(spec_for(provider, session={}), "anyone there?")
        reader = AgentClient(temporal_env.client, task_queue="elsewhere", query_timeout=2)
        with pytest.raises(NoWorkerError) as raised:
            await reader.session(sid).status()
    error = raised.value
    assert error.task_queue == task_queue and error.polled_seconds_ago == []
    assert f"no worker has asked task queue {task_queue!r} for work" in str(error)
    assert "durable-agent worker" in str(error)
    assert provider.requests == []


async def test_a_worker_that_stopped_a_moment_ago_is_told_from_one_that_never_came(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A worker served the session, then died (SIGKILL: no goodbye to the server). The
    server saw it ask for work moments ago, so the error counts it and says the one
    holding the session is busy or stopped within the last minute, rather than asking
    whether a worker runs at all; once the worker is back, the same query answers."""
    with ScriptedProvider([assistant_text("hello")]) as provider:
        agents = AgentClient(temporal_env.client, task_queue=task_queue, query_timeout=3)
        worker = start_worker_process(temporal_env, task_queue)
        try:
            sid = await agents.start(spec_for(provider, session={}), "hi")
            await agents.session(sid).wait(after=1, timeout=60)
        finally:
            worker.kill()
            worker.wait(15)
        with pytest.raises(NoWorkerError) as raised:
            await agents.session(sid).status()
        error, polled = raised.value, raised.value.polled_seconds_ago
        assert polled is not None and len(polled) >= 1  # the server saw the dead worker
        assert f"1 worker asks task queue {task_queue!r}" in str(error)
        assert "busy" in str(error) and "stopped within the last minute" in str(error)
        revived = start_worker_process(temporal_env, task_queue)
        try:
            patient = AgentClient(temporal_env.client, task_queue=task_queue, query_timeout=60)
            assert (await patient.session(sid).status()).phase == "idle"
        finally:
            revived.terminate()
            revived.wait(15)
    assert len(provider.requests) == 1


@pytest.mark.parametrize(
    ("polled", "says"),
    [
        (None, "is a worker running on task queue 'q'?"),
        ([], "no worker has asked task queue 'q' for work in the last minutes"),
        ([200.0, 130.4], "the last worker to ask task queue 'q' for work did so 130 s ago"),
        ([3.2, 400.0, 40.0], "2 workers ask task queue 'q' for work (the last 3 s ago)"),
    ],
    ids=["unknown", "never", "stopped", "alive"],
)
def test_the_error_reads_what_the_server_said(polled: list[float] | None, says: str) -> None:
    """Each answer the server can give, in words (workers it last saw more than a long
    poll ago count as stopped)."""
    text = str(NoWorkerError("s1", "q", 15, polled_seconds_ago=polled))
    assert text.startswith("no worker answered for session 's1' within 15 s: ")
    assert says in text
    assert ("durable-agent worker" in text) == (polled is None or not polled or min(polled) > 75)
    assert text.endswith(still_running("q"))


def still_running(queue: str) -> str:
    """The sentence every wait ends its ``NoWorkerError`` with (written out here, so a
    change to it is a change to this test)."""
    return (
        "The session stays running and nothing is lost: it goes on as soon as a worker "
        f"polls task queue {queue!r}."
    )


async def test_every_wait_says_no_worker_polls_and_the_session_runs_once_one_comes(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """``AgentClient.run``, ``SessionHandle.wait`` and ``SessionHandle.output`` on a
    queue nobody polls each stop within the client's bound with ``NoWorkerError``,
    which names the queue, how to start a worker, and that the session stays running.
    Then a worker comes and the same session runs to its answer: the model was asked
    once, by that worker. Read once it has ended and the worker is gone, the error
    says it ended rather than that it stays running."""
    with ScriptedProvider([assistant_text("late but here")]) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        greeter = Agent("greeter", model=ModelSpec(name="scripted-model", endpoint=endpoint))
        agents = AgentClient(temporal_env.client, task_queue=task_queue, query_timeout=2)
        sid = f"{task_queue}-session"
        with pytest.raises(NoWorkerError) as by_run:
            await agents.run(greeter, "anyone there?", session_id=sid)
        with pytest.raises(NoWorkerError) as by_wait:
            await agents.session(sid).wait()
        with pytest.raises(NoWorkerError) as by_output:
            await agents.session(sid).output(greeter)
        for raised in (by_run, by_wait, by_output):
            error = raised.value
            assert error.session_id == sid and error.task_queue == task_queue
            assert str(error).endswith(still_running(task_queue)), str(error)
            assert f"durable-agent worker --task-queue {task_queue}" in str(error)
        assert provider.requests == []
        worker = start_worker_process(temporal_env, task_queue)
        try:
            answer = await agents.session(sid).output(greeter)
        finally:
            worker.terminate()
            worker.wait(15)
        with pytest.raises(NoWorkerError) as after_the_end:
            await agents.session(sid).status()
    assert answer == "late but here"
    assert len(provider.requests) == 1
    ended = str(after_the_end.value)
    assert ended.endswith(
        f"The session has ended; a worker polling task queue {task_queue!r} reads it."
    )
