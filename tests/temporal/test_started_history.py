"""A long history sent apart from a session's start (``AgentInput.earlier``): the client
sends it as a signal with the start, a worker reads it from the run's own history and
stores it, the run reads it back in pages. Around that entry point: a start that announces
messages it did not send, a history sent later by someone else, a count that does not
match, messages that do not read, encryption (the signal is as encrypted as the
input), and openings that must read as an inline history's do (a swarm's first agent,
an input guardrail on the last message). Each refused start fails before any model
call."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.boundary import EARLIER_HISTORY_SIGNAL, AgentResult
from durable_agent._payloads.encryption import CodecKeys, with_encryption
from durable_agent._spec.document import INLINE_HISTORY_MESSAGES, AgentInput
from durable_agent._tools.hooks import guardrail
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, Message, SystemMessage, UserMessage
from durable_agent.temporal import build_worker
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.support.agent_harness import LOCAL_DEVELOPMENT, running_worker, spec_for, wait_for


def conversation(pairs: int, tag: str = "") -> list[Message]:
    past: list[Message] = []
    for k in range(pairs):
        past += [UserMessage(content=f"q{k}{tag}"), AssistantMessage(content=f"a{k}")]
    return past


async def forged_start(
    client: Client, task_queue: str, spec: Any, announced: int, sent: Any | None
) -> str:
    """A start announcing ``announced`` earlier messages, with ``sent`` as the signal
    sent with it (none: no signal), the way a client other than ours could send it."""
    session_id = f"session-{uuid.uuid4().hex[:12]}"
    await client.start_workflow(
        "AgentWorkflow",
        AgentInput(spec=spec, message="go", earlier=announced),
        id=session_id,
        task_queue=task_queue,
        start_signal=EARLIER_HISTORY_SIGNAL if sent is not None else None,
        start_signal_args=[sent] if sent is not None else [],
    )
    return session_id


async def failure_text(client: Client, session_id: str) -> str:
    handle = client.get_workflow_handle(session_id, result_type=AgentResult)
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), 60)  # one that took the history goes on
    cause = failed.value.cause
    return str(getattr(cause, "cause", None) or cause)


@pytest.mark.parametrize(
    ("announced", "sent", "why"),
    [
        (3, None, "3 messages announced, none sent with the start"),
        (3, [{"role": "user", "content": "only one"}], "1 messages sent, 3 announced"),
        (1, [{"role": "robot", "content": "beep"}], "history: 0: Input tag 'robot'"),
        (1, "not a list", "history: "),
    ],
    ids=["none-sent", "count-differs", "unknown-role", "not-a-list"],
)
async def test_a_start_whose_history_does_not_read_fails_before_any_model_call(
    temporal_env: WorkflowEnvironment, task_queue: str, announced: int, sent: Any, why: str
) -> None:
    with ScriptedProvider([assistant_text("never")]) as provider:
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            spec = spec_for(provider)
            session_id = await forged_start(client, task_queue, spec, announced, sent)
            text = await failure_text(client, session_id)
    assert "invalid session input" in text and why in text, text
    assert provider.bodies() == []  # no request was made


async def test_a_history_signalled_after_the_start_is_nobodys(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Only the signal that came with the start counts: the same signal sent by anyone
    once the run began neither fills an announced history nor changes a running one."""
    planted = [{"role": "user", "content": "planted"}]
    with ScriptedProvider([assistant_text("one"), assistant_text("two")]) as provider:
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            spec = spec_for(provider, session={})
            announced = await forged_start(client, task_queue, spec, 1, None)
            await client.get_workflow_handle(announced).signal(EARLIER_HISTORY_SIGNAL, planted)
            text = await failure_text(client, announced)
            agents = AgentClient(client, task_queue=task_queue)
            plain = await agents.start(spec, "hello")
            await agents.session(plain).wait(timeout=30)
            await client.get_workflow_handle(plain).signal(EARLIER_HISTORY_SIGNAL, planted)
            index = await agents.session(plain).send("and?")
            await agents.session(plain).wait(after=index, timeout=30)
            messages = await agents.session(plain).messages()
            await agents.session(plain).end()
    assert "1 messages announced, none sent with the start" in text, text
    assert [m.content for m in messages] == ["hello", "one", "and?", "two"]
    assert all("planted" not in str(body) for body in provider.bodies())


async def test_a_history_sent_apart_is_as_encrypted_as_the_input(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    canary = f"apart-canary-{secrets.token_hex(8)}"
    keys = CodecKeys.parse(CodecKeys.generate("k1"))
    config = temporal_env.client.config()
    config["data_converter"] = with_encryption(pydantic_data_converter, keys)
    encrypted = Client(**config)
    past = conversation(INLINE_HISTORY_MESSAGES, tag=canary)
    with ScriptedProvider([assistant_text("read")]) as provider:
        spec = spec_for(provider)
        async with build_worker(
            encrypted,
            task_queue=task_queue,
            capabilities=LOCAL_DEVELOPMENT,
            preload_tokenizers=False,
        ):
            agents = AgentClient(encrypted, task_queue=task_queue)
            session_id = await agents.start(spec, "go", history=past)
            result = await agents.session(session_id).result()
            raw = await temporal_env.client.get_workflow_handle(session_id).fetch_history()
    assert result.status == "done", result
    [body] = provider.bodies()
    assert [m["content"] for m in body["messages"]] == [*(m.content for m in past), "go"]
    signaled = [
        e.workflow_execution_signaled_event_attributes
        for e in raw.events
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    assert [s.signal_name for s in signaled].count(EARLIER_HISTORY_SIGNAL) == 1
    assert canary.encode() not in b"".join(e.SerializeToString() for e in raw.events)


guarded = Registry()


@guardrail(registry=guarded)
def no_secret(text: str) -> str | None:
    return "mentions the secret" if "secret" in text else None


@pytest.mark.parametrize("apart", [False, True], ids=["inline", "apart"])
async def test_a_long_history_opens_as_an_inline_one_does(
    temporal_env: WorkflowEnvironment, task_queue: str, apart: bool
) -> None:
    """A swarm whose first agent has its own instructions, an input guardrail, and a
    history whose last message is the user's (no ``message``): sent apart or inline, the
    array opens the same (the agent's instructions first, under its name), the last
    message is checked by the guardrail before the turn, and the model sees the same."""
    past = conversation(INLINE_HISTORY_MESSAGES if apart else 5)
    past.append(UserMessage(content="and the secret?"))
    swarm = {
        "default_agent": "triage",
        "agents": [
            {"name": "triage", "instructions": "Route the question."},
            {"name": "billing", "instructions": "Handle payments."},
        ],
    }
    with ScriptedProvider([assistant_text("never")]) as provider:
        spec = spec_for(provider, swarm=swarm, guardrails={"input": ["no_secret"]}, session={})
        async with running_worker(temporal_env, task_queue, guarded) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session_id = await agents.start(spec, history=past)
            status = await wait_for(lambda: _refused(agents, session_id), timeout=60)
            messages = await agents.session(session_id).messages()
            start = (await agents.temporal.get_workflow_handle(session_id).fetch_history()).events[
                0
            ]
            await agents.session(session_id).end()
    sent = start.workflow_execution_started_event_attributes.input.payloads[0].data
    assert (b'"earlier"' in sent) is apart
    assert status.last_error == "input guardrail no_secret: mentions the secret"
    assert provider.bodies() == []  # the guardrail held the turn: no request
    first = messages[0]
    assert isinstance(first, SystemMessage) and first.agent_name == "triage"
    assert first.content == "Route the question."
    assert [m.content for m in messages[1:]] == [m.content for m in past]
    last = messages[-1]
    assert isinstance(last, UserMessage) and last.blocked  # checked, and kept


async def _refused(agents: AgentClient, session_id: str) -> Any:
    status = await agents.session(session_id).status()
    return status if status.last_error else None
