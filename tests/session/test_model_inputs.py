"""What a model takes (images, audio, files): a part the model (or its wire)
cannot take is left out of the request with a visible marker, or the message is refused
when it is sent; never a failed session. Structured output is asked for as the endpoint
takes it: ``json_schema``, ``json_object`` with a schema (llama.cpp's form), or in
words, with the answer validated either way."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, AgentSpec
from durable_agent._client.results import MessageRefusedError
from durable_agent._contracts.boundary import MoveToAgentSignal
from durable_agent._session import Session, SessionState
from durable_agent._session.protocol import MessageArrived, MoveRequested
from durable_agent._spec.document import AgentInput
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import TextPart, UserMessage, audio_part, image_part
from durable_agent._wire.outgoing import ModelInputs, fit_to_model
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import json_reply
from tests.support.agent_harness import running_worker, spec_for
from tests.support.swarm_fixtures import swarm_section

registry = Registry()
IMAGE = "https://example.com/cat.png"


def with_model(spec: AgentSpec, **model: Any) -> AgentSpec:
    data = spec.model_dump()
    for key, value in model.items():
        if isinstance(value, dict) and isinstance(data["model"].get(key), dict):
            data["model"][key] = {**data["model"][key], **value}
        else:
            data["model"][key] = value
    return AgentSpec.model_validate(data)


def picture(text: str) -> UserMessage:
    return UserMessage(content=[TextPart(text=text), image_part(IMAGE)])


async def test_an_image_to_a_model_without_vision_is_left_out_with_a_marker(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("I cannot see it, but hello")]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = with_model(spec_for(provider), inputs={"images": False})
            sid = await agents.start(spec, picture("what is this?"))
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    assert result.status == "done" and result.final is not None
    sent = provider.bodies()[0]["messages"][-1]["content"]
    assert sent == [
        {"type": "text", "text": "what is this?"},
        {"type": "text", "text": "[image omitted: this model takes no images]"},
    ]
    assert IMAGE not in json.dumps(provider.bodies()[0])
    assert messages[0].content[1].image_url.url == IMAGE  # type: ignore[union-attr]  # kept


async def test_audio_to_the_anthropic_wire_is_left_out_not_a_failed_session(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    anthropic_reply = json_reply(
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "heard nothing"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 9, "output_tokens": 2},
        }
    )
    with ScriptedProvider([anthropic_reply]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = with_model(spec_for(provider), endpoint={"api": "anthropic"}, stream=False)
            message = UserMessage(
                content=[TextPart(text="listen"), audio_part(b"RIFF", "audio/wav")]
            )
            sid = await agents.start(spec, message)
            result = await agents.session(sid).result()
    assert result.status == "done" and result.final.content == "heard nothing"  # type: ignore[union-attr]
    body = provider.bodies()[0]
    assert provider.requests[0].path.endswith("/messages")
    assert body["messages"][0]["content"][1] == {
        "type": "text",
        "text": "[audio omitted: this model takes no audio]",
    }


async def test_a_model_that_refuses_parts_refuses_the_message_when_it_is_sent(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider(
        [assistant_text("hello"), assistant_text("plain text is fine")]
    ) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = with_model(
                spec_for(provider, session={}), inputs={"images": False, "unsupported": "refuse"}
            )
            with pytest.raises(ValueError, match="the model takes no images"):
                AgentInput(spec=spec, message=picture("at start"))
            sid = await agents.start(spec, "hi")
            await agents.session(sid).wait(timeout=60)
            with pytest.raises(MessageRefusedError, match="the model takes no images"):
                await agents.session(sid).send(picture("look"))
            with pytest.raises(MessageRefusedError, match="the model takes no images"):
                await agents.converse(sid, picture("look"), spec)
            index = await agents.session(sid).send("just text")
            await agents.session(sid).wait(after=index, timeout=60)
            messages = await agents.session(sid).messages()
            await agents.session(sid).end()
    assert [m.content for m in messages] == ["hi", "hello", "just text", "plain text is fine"]
    assert len(provider.requests) == 2  # the refused messages reached no model


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
    "required": ["city", "temp"],
}


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "instructions"])
async def test_structured_output_is_asked_for_as_the_endpoint_takes_it(
    temporal_env: WorkflowEnvironment, task_queue: str, mode: str
) -> None:
    answer = assistant_text('{"city": "Oslo", "temp": 4}')
    with ScriptedProvider([answer]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            spec = with_model(
                spec_for(provider, output_schema=SCHEMA), inputs={"structured_output": mode}
            )
            result = await agents.session(await agents.start(spec, "weather in Oslo?")).result()
    body = provider.bodies()[0]
    last = body["messages"][-1]
    assert result.structured_output == {"city": "Oslo", "temp": 4}
    if mode == "json_schema":
        assert body["response_format"]["type"] == "json_schema"
        assert last["role"] == "user"
    else:
        assert last["role"] == "system" and json.dumps(SCHEMA, sort_keys=True) in last["content"]
    if mode == "json_object":
        assert body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    if mode == "instructions":
        assert "response_format" not in body


def test_fitting_keeps_what_the_model_takes_and_marks_the_rest() -> None:
    message = UserMessage(
        content=[TextPart(text="a"), image_part(IMAGE), audio_part(b"x", "audio/wav")]
    )
    takes = ModelInputs(audio=False).kinds()
    fitted = fit_to_model([message, UserMessage(content="plain")], takes)
    assert fitted[0].content[:2] == message.content[:2]  # type: ignore[index]
    assert fitted[0].content[2] == TextPart(text="[audio omitted: this model takes no audio]")  # type: ignore[index]
    assert fitted[1] == UserMessage(content="plain")
    assert fit_to_model([message], ModelInputs().kinds()) == [message]


def test_in_a_swarm_the_answering_agents_model_decides_what_is_refused() -> None:
    """triage answers first on a model that takes images; billing's model refuses them:
    a picture is refused only once billing answers."""
    blind = {"name": "blind-model", "inputs": {"images": False, "unsupported": "refuse"}}
    spec = AgentSpec.model_validate(
        {"model": {"name": "seeing-model"}, "swarm": swarm_section(model=blind)}
    )
    session = Session(spec, SessionState())
    assert session.view.refusal(MessageArrived(picture("look"))) is None  # triage sees
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert session.handle(MoveRequested(MoveToAgentSignal(agent="billing", by="ops")), now) is None
    session.next_command(suggested=False, now=now)  # it moves (a command it asks, only read)
    assert session.view.model.agent_name == "billing"
    problem = session.view.refusal(MessageArrived(picture("look")))
    assert problem == "send_message: the model takes no images"


def test_a_swarms_first_message_is_checked_against_its_first_agents_model() -> None:
    blind = {"name": "blind-model", "inputs": {"images": False, "unsupported": "refuse"}}
    section = swarm_section(model=blind)
    section["default_agent"] = "billing"
    spec = AgentSpec.model_validate({"model": {"name": "seeing-model"}, "swarm": section})
    with pytest.raises(ValueError, match="the model takes no images"):
        AgentInput(spec=spec, message=picture("at start"))
    section["default_agent"] = None  # triage first: its model (the spec's) sees
    seeing = AgentSpec.model_validate({"model": {"name": "seeing-model"}, "swarm": section})
    assert AgentInput(spec=seeing, message=picture("at start")).message is not None
