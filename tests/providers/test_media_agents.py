"""Embeddings and image generation by an agent: an endpoint that names the ``embeddings`` or
``images`` API answers each turn with what that model makes, as JSON; as a sub-agent,
that JSON is the parent's tool result."""

from __future__ import annotations

import json
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, AgentSpec
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest, json_reply
from tests.support.agent_harness import running_worker, spec_for

URL = "https://images.example/lighthouse.png"


def media_spec(provider: ScriptedProvider, api: str, name: str, **kw: Any) -> AgentSpec:
    data = spec_for(provider, **kw).model_dump()
    data["model"]["name"] = name
    data["model"]["endpoint"]["api"] = api
    return AgentSpec.model_validate(data)


async def test_an_embeddings_agent_answers_with_a_vector_per_text(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    data = [{"index": 1, "embedding": [0.3, 0.4]}, {"index": 0, "embedding": [0.1, 0.2]}]
    vectors = {"data": data, "usage": {"prompt_tokens": 6, "total_tokens": 6}}
    with ScriptedProvider([json_reply(vectors)]) as provider:
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = media_spec(
                provider, "embeddings", "text-embedding-3-small", instructions="tides"
            )
            result = await agents.session(await agents.start(spec, "moon")).result()
    assert provider.requests[0].path == "/v1/embeddings"
    assert provider.bodies()[0] == {"model": "text-embedding-3-small", "input": ["tides", "moon"]}
    assert result.final is not None
    assert json.loads(result.final.content) == {"embeddings": [[0.1, 0.2], [0.3, 0.4]]}
    assert result.usage.prompt_tokens == 6


async def test_an_image_agent_called_as_a_sub_agent_returns_its_images_to_the_parent(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    def answer(request: RecordedRequest) -> Any:
        if request.path.endswith("/images/generations"):
            return json_reply({"data": [{"url": URL, "revised_prompt": "a lighthouse at dusk"}]})
        if any(m["role"] == "tool" for m in request.body["messages"]):
            return assistant_text("Here is your picture.")
        return assistant_calls(("illustrator", {"task": "a lighthouse"}))

    with ScriptedProvider(responder=answer) as provider:
        child = media_spec(provider, "images", "gpt-image-1")
        illustrator = {"name": "illustrator", "description": "Draws", "spec": child.model_dump()}
        spec = spec_for(provider, [], agents=[illustrator])
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "draw me a lighthouse")
            result = await agents.session(session).result()
            messages = await agents.session(session).messages()
    [drawn] = [m for m in messages if isinstance(m, ToolMessage)]
    assert json.loads(drawn.content) == {
        "images": [{"url": URL, "revised_prompt": "a lighthouse at dusk"}]
    }
    image_requests = [r for r in provider.requests if r.path.endswith("/images/generations")]
    assert [r.body for r in image_requests] == [{"model": "gpt-image-1", "prompt": "a lighthouse"}]
    assert result.final is not None and result.final.content == "Here is your picture."
