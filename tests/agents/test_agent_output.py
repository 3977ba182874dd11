"""Agents written in Python with a typed output, on Chat Completions, Responses and
Anthropic: the wire asks for the type's JSON Schema, a valid answer comes back as an
instance, an invalid one is corrected and asked again, and one that never validates
fails the run clearly with the raw text kept in the session."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel
from temporalio.testing import WorkflowEnvironment

from durable_agent import Agent, AgentClient
from durable_agent._contracts.boundary import AgentRunError
from durable_agent._spec.document import ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ResqueMessage
from durable_agent.testing import ScriptedProvider
from durable_agent.testing._scripted_provider import Reply, json_reply
from tests.support.agent_harness import running_worker


class Forecast(BaseModel):
    city: str
    celsius: int
    rain: bool


VALID = '{"city": "Bergen", "celsius": 9, "rain": true}'
INVALID = '{"city": "Bergen", "celsius": "mild"}'


def answer(api: str, text: str) -> Reply:
    """``text`` as each API's whole (not streamed) response body."""
    if api == "chat":
        message = {"role": "assistant", "content": text}
        return json_reply({"choices": [{"message": message, "finish_reason": "stop"}]})
    if api == "responses":
        item = {"type": "message", "role": "assistant"}
        item["content"] = [{"type": "output_text", "text": text}]
        return json_reply({"id": "resp_1", "status": "completed", "output": [item]})
    blocks = [{"type": "text", "text": text}]
    return json_reply(
        {"type": "message", "role": "assistant", "stop_reason": "end_turn", "content": blocks}
    )


def asked_schema(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema a request asked the answer to match, where each API puts it."""
    if api == "chat":
        found: dict[str, Any] = body["response_format"]["json_schema"]["schema"]
    elif api == "responses":
        found = body["text"]["format"]["schema"]
    else:
        found = body["output_config"]["format"]["schema"]
    return found


def forecaster(provider: ScriptedProvider, api: str, **settings: Any) -> Agent[Forecast]:
    endpoint = ProviderEndpoint(base_url=provider.base_url, api=api, api_key_env=None)
    return Agent(
        name="forecaster",
        model=ModelSpec(name="scripted", endpoint=endpoint, stream=False),
        instructions="Answer with the forecast.",
        output_type=Forecast,
        settings=settings,
    )


APIS = ["chat", "responses", "anthropic"]


@pytest.mark.parametrize("api", APIS)
async def test_a_valid_answer_is_an_instance_of_the_type(
    temporal_env: WorkflowEnvironment, task_queue: str, api: str
) -> None:
    with ScriptedProvider([answer(api, VALID)]) as provider:
        agent = forecaster(provider, api)
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            run = await AgentClient(client, task_queue=task_queue).run(agent, "Bergen tomorrow?")
    assert run.output == Forecast(city="Bergen", celsius=9, rain=True)
    assert isinstance(run.output, Forecast)
    schema = asked_schema(api, provider.requests[0].body)
    assert set(schema["properties"]) == {"city", "celsius", "rain"}, schema


@pytest.mark.parametrize("api", APIS)
async def test_an_invalid_answer_is_corrected_and_asked_again(
    temporal_env: WorkflowEnvironment, task_queue: str, api: str
) -> None:
    with ScriptedProvider([answer(api, INVALID), answer(api, VALID)]) as provider:
        agent = forecaster(provider, api)
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            run = await agents.run(agent, "Bergen tomorrow?")
            messages = await agents.session(run.session_id).messages()
    assert run.output.celsius == 9 and len(provider.requests) == 2
    [rescue] = [m for m in messages if isinstance(m, ResqueMessage)]
    assert "celsius" in rescue.reason, rescue.reason
    second = json.dumps(provider.requests[1].body)
    assert "celsius" in second and "mild" in second, "the model read its answer and why"


@pytest.mark.parametrize("api", APIS)
async def test_an_answer_that_never_validates_fails_clearly_and_keeps_the_text(
    temporal_env: WorkflowEnvironment, task_queue: str, api: str
) -> None:
    replies = [answer(api, INVALID), answer(api, INVALID)]
    with ScriptedProvider(replies) as provider:
        agent = forecaster(provider, api, rescue={"max_attempts": 1})
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            with pytest.raises(AgentRunError) as failed:
                await agents.run(agent, "Bergen tomorrow?")
            messages = await agents.session(failed.value.session_id).messages()
    assert failed.value.result.status == "failed"
    assert "could not be used" in str(failed.value) and "celsius" in str(failed.value)
    raw = [m.content for m in messages if m.role == "assistant"]
    assert raw == [INVALID, INVALID], "the raw answers stay in the session"


def test_an_agent_is_the_spec_users_write() -> None:
    registry = Registry()

    @tool(registry=registry)
    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    endpoint = ProviderEndpoint(base_url="http://127.0.0.1:1/v1", api_key_env=None)
    agent: Agent[str] = Agent(
        name="chat", model=ModelSpec(name="m", endpoint=endpoint), tools=[lookup, "other"]
    )
    spec = agent.spec()
    assert agent.output_schema() is None and spec.output_schema is None
    assert [t.name for t in spec.tools] == ["lookup", "other"]
    assert not spec.session.end_after_reply and agent.spec(one_reply=True).session.end_after_reply
