"""A model that refuses a request as longer than its context window: the call is tried
again with half of it (the oldest exchanges left out, the latest message kept), then a
quarter, at most three times; then the turn ends with the provider's words."""

from __future__ import annotations

from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, UserMessage
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import error_reply
from tests.support.agent_harness import record_history, running_worker, spec_for

TOO_LONG = (
    "This model's maximum context length is 8192 tokens. However, your messages "
    "resulted in 9012 tokens. Please reduce the length of the messages."
)


def long_history() -> list[Any]:
    history: list[Any] = []
    for k in range(10):
        history.append(UserMessage(content=f"question {k}: " + "words " * 200))
        history.append(AssistantMessage(content=f"answer {k}: " + "words " * 200))
    return history


def sent(provider: ScriptedProvider) -> list[list[str]]:
    return [[m["content"][:12] for m in body["messages"]] for body in provider.bodies()]


async def test_a_request_too_long_is_tried_again_shorter_and_answered(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [error_reply(400, TOO_LONG), assistant_text("fits now")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = spec_for(provider, instructions="Be brief.")
            sid = await agents.start(spec, "the last question", history=long_history())
            result = await agents.session(sid).result()
            await record_history(client.get_workflow_handle(sid), "context_overflow_trimmed")
    first, second = sent(provider)
    assert result.status == "done" and result.final is not None
    assert result.final.content == "fits now"
    assert len(first) == 22 and len(second) < len(first) * 0.75  # about half the text
    assert second[0] == "Be brief." and second[-1] == "the last que"  # kept at both ends
    assert first[-len(second) + 1 :] == second[1:]  # the oldest exchanges left out


async def test_three_shorter_tries_then_the_turn_ends_with_the_providers_words(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([error_reply(400, TOO_LONG)] * 4) as provider:
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = spec_for(provider)
            result = await agents.session(
                await agents.start(spec, "the last question", history=long_history())
            ).result()
    sizes = [len(messages) for messages in sent(provider)]
    assert result.status == "failed" and "maximum context length" in (result.error or "")
    assert len(sizes) == 4 and sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]
