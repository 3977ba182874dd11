"""Hooks over each model call: a request hook rewrites what a model
call sends (the array keeps what was said), a reply hook rewrites the reply before it
is recorded, and the rewrite is what history holds: a worker that replays every task
(no cache) and the recorded-history replay see it without running the hook again. A
hook the worker lacks refuses the session at its start; one that raises ends the turn.
"""

from __future__ import annotations

import json
import re

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, HookContext, round_hook
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, Message, UserMessage
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import Reply, chat_stream_events, sse_reply
from tests.support.agent_harness import record_history, running_worker, spec_for

registry = Registry()
SEEN: list[HookContext] = []
EMAIL = re.compile(r"[\w.]+@[\w.]+")


@round_hook(registry=registry)
def redact_emails(messages: list[Message], context: HookContext) -> list[Message]:
    SEEN.append(context)
    return [
        m.model_copy(update={"content": EMAIL.sub("[email]", m.content)})
        if isinstance(m, UserMessage) and isinstance(m.content, str)
        else m
        for m in messages
    ]


@round_hook(on="reply", registry=registry)
async def sign_off(reply: AssistantMessage, context: HookContext) -> AssistantMessage:
    return reply.model_copy(update={"content": reply.content + " (checked)"})


@round_hook(on="reply", registry=registry)
def refuses_everything(reply: AssistantMessage, context: HookContext) -> None:
    raise RuntimeError("the reviewer is away")


async def test_hooks_rewrite_the_request_and_the_reply_and_replay_reads_the_rewrite(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    SEEN.clear()
    # streamed well past the first delta's wait: without the hook, readers would see it
    script = [slow(assistant_text("Noted your address")), slow(assistant_text("Bye"))]
    with ScriptedProvider(script) as provider:
        async with running_worker(
            temporal_env, task_queue, registry, max_cached_workflows=0
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            hooks = {"request": ["redact_emails"], "reply": ["sign_off"]}
            spec = spec_for(provider, session={}, hooks=hooks)
            sid = await agents.start(spec, "write to ana@example.com please")
            await agents.session(sid).wait(timeout=60)
            index = await agents.session(sid).send("thanks")
            await agents.session(sid).wait(after=index, timeout=60)
            messages = await agents.session(sid).messages()
            events = [e.type async for e in _until_idle(agents, sid)]
            await agents.session(sid).end()
            await record_history(client.get_workflow_handle(sid), "round_hooks")
    sent = [json.dumps(body["messages"]) for body in provider.bodies()]
    assert "ana@example.com" not in sent[0] and "[email]" in sent[0]
    assert "ana@example.com" not in sent[1]
    assert messages[0].content == "write to ana@example.com please"  # the array keeps it
    assert [m.content for m in messages[1::2]] == ["Noted your address (checked)", "Bye (checked)"]
    assert '"Noted your address (checked)"' in sent[1]  # the next call sends the record
    assert [(c.session_id, c.turn) for c in SEEN] == [(sid, 1), (sid, 2)]
    assert "text_delta" not in events  # a reply hook's input is not streamed to readers


def slow(message: AssistantMessage) -> Reply:
    return sse_reply(chat_stream_events(message), delay=0.04)


async def _until_idle(agents: AgentClient, sid: str):  # type: ignore[no-untyped-def]
    async for event in agents.session(sid).follow():
        yield event
        if event.type == "idle" and event.message_count >= 4:
            return


async def test_a_hook_the_worker_lacks_refuses_the_session_and_one_that_raises_ends_the_turn(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("first"), assistant_text("second")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            missing = spec_for(provider, hooks={"reply": ["not_loaded"]})
            with pytest.raises(WorkflowFailureError) as refused:
                await agents.session(await agents.start(missing, "hi")).result()
            failing = spec_for(provider, session={}, hooks={"reply": ["refuses_everything"]})
            sid = await agents.start(failing, "hi")
            first = await agents.session(sid).wait(timeout=60)
            status = await agents.session(sid).status()
            await agents.session(sid).end()
    assert "not_loaded" in str(refused.value.cause)  # failed at its start, no model call
    assert "refuses_everything" in (status.last_error or "")
    assert "the reviewer is away" in (status.last_error or "")
    assert first.kind == "reply" and status.phase == "idle"
    assert len(provider.requests) == 1  # the hook's failure is not retried
