"""A message someone sends may carry an id of its own, but not one of the form the
session gives its own messages (``m<position>``): such an id would name another message
of the array, and a reader that goes by id (the message log, a chat client skipping
what it holds) would take one for the other. On the real server the message is refused
at every entry point (a start, the checked send, a bare signal, an inject) and the array
holds no message with a borrowed id; an id of another form is kept."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._client._types import MessageRefusedError
from durable_agent._tools._registry import Registry
from durable_agent._wire._messages import SystemMessage, UserMessage
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.support.agent_harness import running_worker, spec_for


async def test_an_id_of_the_sessions_own_form_is_refused_at_every_door(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("one"), assistant_text("two")]) as provider:
        spec = spec_for(provider, session={})
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            with pytest.raises(Exception, match="form this session gives its own") as started:
                await agents.start(spec, UserMessage(content="hi", id="m3"))
            sid = await agents.start(spec, UserMessage(content="hi", id="client-1"))
            session = agents.session(sid)
            await session.wait(after=0, timeout=60)
            with pytest.raises(MessageRefusedError, match="'m2' has the form"):
                await session.send(UserMessage(content="again", id="m2"))
            await client.get_workflow_handle(sid).signal(
                "send_message", UserMessage(content="again", id="m4")
            )
            with pytest.raises(MessageRefusedError, match="'m9' has the form"):
                await session.inject(SystemMessage(content="note", id="m9"))
            status = await session.status()
            cursor = await session.send(UserMessage(content="again", id="client-2"))
            await session.wait(after=cursor, timeout=60)
            messages = await session.messages()
            await session.end(by="ops")
    # refused before anything started (a hand-written start fails the same way)
    assert not isinstance(started.value, WorkflowFailureError)
    assert any("'m4' has the form" in r for r in status.rejected_signals)
    ids = [m.id for m in messages]
    assert ids.count("m2") <= 1 and "m4" not in ids[:4] and "m9" not in ids
    assert [m.content for m in messages if m.id in ("client-1", "client-2")] == ["hi", "again"]
    assert len(ids) == len(set(ids)), "no two messages share an id"
    assert [m.content for m in messages if m.role == "user"] == ["hi", "again"]
