"""One request builder: what a test sees is what a worker sends.

The worker's path is the real one: the ``call_model`` activity on a worker of the real
dev server, through the provider client over HTTP to a model server on 127.0.0.1 that
records each body as it arrives. The in-process path is ``run_in_process``. For the same
session (same agent, same messages, same session id), the bodies are the same bytes,
request after request, on each built-in wire.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from durable_agent import Agent, AssistantMessage, HookContext, Message, ModelSpec, round_hook, tool
from durable_agent._contracts.boundary import ModelSetup
from durable_agent._errors import NotAllowed
from durable_agent._session.model_call import built_request
from durable_agent._spec.document import AgentInput, HookNames
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import DEFAULT_API, built_in_codec
from durable_agent._wire.messages import UserMessage
from durable_agent._wire.options import ModelOptions, ReasoningWire
from durable_agent.capabilities import Capabilities, ProviderEndpoint
from durable_agent.testing import (
    AgentTestEnvironment,
    FunctionModel,
    ModelRequest,
    assistant_calls,
    assistant_text,
    run_in_process,
)
from durable_agent.testing._in_process import InProcessRun

SECRET_ENV = "DURABLE_AGENT_CACHE_KEY_SECRET"


@tool
def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    return f"sun in {city}"


def _weather(endpoint: ProviderEndpoint) -> Agent[str]:
    options = ModelOptions(prompt_cache=True, temperature=0.2, max_output_tokens=300)
    return Agent(
        name="weather",
        model=ModelSpec(name="m-1", endpoint=endpoint, options=options),
        instructions="Answer with the forecast.",
        tools=[forecast],
    )


def _recording(bodies: list[dict[str, Any]]) -> Any:
    """A model that asks for the forecast, then answers; it keeps each body it is sent."""

    def answer(request: ModelRequest) -> AssistantMessage:
        bodies.append(request.body)
        if len(bodies) % 2:
            return assistant_calls(("forecast", {"city": "Oslo"}))
        return assistant_text("Sun in Oslo tomorrow.")

    return answer


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
async def test_a_worker_sends_the_bodies_the_in_process_run_builds(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, "one fleet")  # both derive the same prompt-cache key
    sent: list[dict[str, Any]] = []
    server = FunctionModel(_recording(sent))
    endpoint = server.endpoint.model_copy(update={"api": api})
    agent = _weather(endpoint)
    async with AgentTestEnvironment(model=server) as env:
        run = await env.run(agent, "Weather in Oslo?", session_id="in-process-weather")
    assert run.output == "Sun in Oslo tomorrow."
    built: list[dict[str, Any]] = []
    local = await run_in_process(agent, "Weather in Oslo?", model=_recording(built))
    assert local.output == run.output
    worker_bodies = [json.dumps(r.body) for r in server.requests]
    assert len(worker_bodies) == 2, "the tool round, then the answer"
    assert [json.dumps(b) for b in built] == worker_bodies
    # a body with what each step adds: tools, the cache key, the output cap, the stream
    last = server.requests[-1].body
    codec = built_in_codec(api)
    assert last.get("tools") and last.get(codec.output_cap) and last.get("stream") is True
    assert last.get("prompt_cache_key") or api == "anthropic"  # (its cache marks instead)


def test_an_endpoint_that_names_no_wire_speaks_the_default_one() -> None:
    assert ProviderEndpoint().api == DEFAULT_API


def test_the_builder_is_a_function_of_data() -> None:
    """The same conversation and setup build the same body, every time, with no worker
    and no I/O; the cache key follows the session and the secret."""
    setup = ModelSetup(
        endpoint=ProviderEndpoint(base_url="http://127.0.0.1:9/v1", api_key_env=None),
        model="m-1",
        options=ModelOptions(prompt_cache=True),
        reasoning=ReasoningWire(),
        stream=False,
    )
    conversation = [UserMessage(content="Hi")]
    codec = built_in_codec("chat")
    once = built_request(conversation, setup, codec, session_id="s-1", cache_secret=b"k")
    again = built_request(conversation, setup, codec, session_id="s-1", cache_secret=b"k")
    other = built_request(conversation, setup, codec, session_id="s-2", cache_secret=b"k")
    assert once == again and once.left_out == 0
    assert once.body["messages"] == [{"role": "user", "content": "Hi"}]
    assert once.body["prompt_cache_key"] != other.body["prompt_cache_key"]


def _picky(endpoint: ProviderEndpoint | str) -> Agent[str]:
    options = ModelOptions(extra={"logit_bias": {"50256": -100}})
    return Agent(name="picky", model=ModelSpec(name="m-1", endpoint=endpoint, options=options))


async def test_the_in_process_run_refuses_options_the_owner_did_not_list() -> None:
    """The owner registered the endpoint and listed no request option: the spec's
    ``extra`` key is refused in process as a worker refuses it, and no model is asked."""
    local = ProviderEndpoint(base_url="http://127.0.0.1:9/v1", api_key_env=None)
    owner = Capabilities(models={"local": local})
    asked: list[ModelRequest] = []

    def model(request: ModelRequest) -> AssistantMessage:
        asked.append(request)
        return assistant_text("hi")

    with pytest.raises(NotAllowed, match=r"extra\['logit_bias'\]: this worker does not send"):
        await run_in_process(_picky("local"), "Hi", model=model, capabilities=owner)
    # at each call too, for a setup no start checked (as a worker checks each call)
    spec = _picky("local").spec()
    run = InProcessRun(spec=spec, registry=Registry(), answer=model, capabilities=owner)
    result = await run.run(AgentInput(spec=spec, message="Hi"))
    turn = result.final  # the turn ends with the worker's words, as a worker's would
    assert isinstance(turn, AssistantMessage) and turn.is_error, result
    assert "extra['logit_bias']: this worker does not send 'logit_bias'" in (turn.error or "")
    assert asked == [] and run.requests == []
    # the same spec with no owner's rules goes to its model
    free = InProcessRun(spec=spec, registry=Registry(), answer=model)
    assert (await free.run(AgentInput(spec=spec, message="Hi"))).status == "done"
    assert len(asked) == 1


hooks = Registry()


@round_hook(registry=hooks)
def redact(messages: list[Message], context: HookContext) -> list[Message]:
    return [
        m.model_copy(update={"content": "[redacted]"}) if isinstance(m, UserMessage) else m
        for m in messages
    ]


@round_hook(on="reply", registry=hooks)
def sign_off(reply: AssistantMessage, context: HookContext) -> AssistantMessage:
    return reply.model_copy(update={"content": reply.content + " (checked)"})


async def test_the_in_process_run_puts_each_call_through_the_owners_hooks() -> None:
    """The request hook rewrites what the model is sent, between fitting and shaping, and
    the reply hook what the session records, as on a worker."""
    endpoint = ProviderEndpoint(base_url="http://127.0.0.1:9/v1", api_key_env=None)
    spec = Agent(name="hooked", model=ModelSpec(name="m-1", endpoint=endpoint)).spec()
    spec = spec.model_copy(update={"hooks": HookNames(request=["redact"], reply=["sign_off"])})
    run = InProcessRun(spec=spec, registry=hooks, answer=lambda request: assistant_text("ok"))
    result = await run.run(AgentInput(spec=spec, message="mail me at a@example.com"))
    assert run.requests[0]["messages"][-1] == {"role": "user", "content": "[redacted]"}
    assert isinstance(result.final, AssistantMessage)
    assert result.final.content == "ok (checked)"
