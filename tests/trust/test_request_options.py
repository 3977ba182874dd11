"""A spec's request options cannot reach past the worker's owner: ``model.options.extra``
never sets a key the request is built from (the model, the messages, the tools, the
limits), whatever the owner allows, and any other key goes only to an endpoint whose
owner lists it (``request_options`` in ``Capabilities.endpoint_rules``). A spec naming
another is refused when it starts and sends nothing; the shared limit of a model holds
for the model the request names. Shown by what the scripted provider received over real HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from durable_agent import Agent, AgentClient, AgentSpec, ModelSpec
from durable_agent._errors import NotAllowed
from durable_agent._spec.endpoints import ProviderEndpoint, ProviderLimits
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import BUILT_IN_CODECS, built_by
from durable_agent._wire.messages import user_message
from durable_agent._wire.options import ModelOptions
from durable_agent.capabilities import Capabilities, load_capabilities
from durable_agent.capabilities._admission import admission_problems
from durable_agent.capabilities._config_file import CapabilitiesFileError
from durable_agent.capabilities._registry import EndpointRules
from durable_agent.temporal._plugin import with_agents
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.support.agent_harness import running_worker, wait_for


def spec(endpoint: str, model: str, extra: dict[str, Any] | None = None) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "model": {
                "name": model,
                "endpoint": endpoint,
                "max_attempts": 1,
                "stream": False,
                "options": {"extra": extra or {}},
            },
            "session": {"end_after_reply": True},
        }
    )


def models_received(provider: ScriptedProvider) -> list[str]:
    return [body["model"] for body in provider.bodies()]


async def failure(agents: AgentClient, session: str) -> str:
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(agents.session(session).result(), 60)
    return str(failed.value.cause)


async def test_extra_cannot_name_another_model_and_the_models_limit_holds(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """``fm/expensive`` takes one request at a time. While a session naming
    ``expensive`` holds it, two sessions naming ``cheap`` with ``extra.model =
    "expensive"`` are refused at start and send nothing (even with ``model`` in the
    owner's list: no setting lets a spec replace a key the worker builds); a plain
    ``cheap`` session goes on at once, and a second ``expensive`` one waits its turn."""
    held = threading.Event()

    def answer(request: RecordedRequest) -> Any:
        if "first" in json.dumps(request.body):
            assert held.wait(60)
        return assistant_text("done")

    with ScriptedProvider(responder=answer) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        capabilities = Capabilities(
            models={"fm": endpoint},
            limits={"fm/expensive": ProviderLimits(concurrent_requests=1)},
            endpoint_rules={"fm": {"request_options": ["model", "messages"]}},
        )
        async with running_worker(
            temporal_env, task_queue, Registry(), capabilities=capabilities
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            first = await agents.start(spec("fm", "expensive"), "first")
            await wait_for(lambda: _requests(provider, 1), timeout=60)
            forged = spec("fm", "cheap", {"model": "expensive"})
            sneaks = [await agents.start(forged, f"sneak {k}") for k in range(2)]
            texts = [await failure(agents, s) for s in sneaks]
            swapped = spec("fm", "cheap", {"messages": [{"role": "user", "content": "x"}]})
            texts.append(await failure(agents, await agents.start(swapped, "swap")))
            plain = await agents.start(spec("fm", "cheap"), "plain")
            assert (await agents.session(plain).result()).status == "done"
            second = await agents.start(spec("fm", "expensive"), "second")
            await wait_for(lambda: _waiting_on(agents, second, "fm/expensive"), timeout=60)
            assert models_received(provider) == ["expensive", "cheap"], "the sneaks sent none"
            held.set()
            for session in (first, second):
                assert (await agents.session(session).result()).status == "done"
    assert models_received(provider) == ["expensive", "cheap", "expensive"]
    for text, key in zip(texts, ["model", "model", "messages"], strict=True):
        assert f"model.options.extra[{key!r}]: the worker builds {key!r} itself" in text


async def test_an_option_goes_only_where_the_owner_lists_it(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """``extra.user`` (the end-user id a provider tracks abuse by) is refused at start on
    an endpoint whose owner lists no options, and nothing is sent; on one that lists it
    the request carries it."""
    with ScriptedProvider([assistant_text("ok")]) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        other = endpoint.model_copy(update={"headers": {"x-route": "open"}})
        capabilities = Capabilities(
            models={"strict": endpoint, "open": other},
            endpoint_rules={"open": {"request_options": ["user"]}},
        )
        async with running_worker(
            temporal_env, task_queue, Registry(), capabilities=capabilities
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            as_victim = {"user": "victim-user-id", "logprobs": True}
            text = await failure(agents, await agents.start(spec("strict", "m", as_victim), "hi"))
            assert provider.requests == [], "a refused session sends nothing"
            text_open = await failure(
                agents, await agents.start(spec("open", "m", as_victim), "hi")
            )
            assert provider.requests == []
            allowed = await agents.start(spec("open", "m", {"user": "victim-user-id"}), "hi")
            assert (await agents.session(allowed).result()).status == "done"
    assert "extra['user']: this worker does not send 'user'" in text
    assert "endpoint_rules['strict']" in text
    assert "extra['logprobs']" in text_open and "extra['user']" not in text_open
    [body] = provider.bodies()
    assert body["user"] == "victim-user-id" and body["model"] == "m"


@pytest.mark.parametrize("api", sorted(BUILT_IN_CODECS))
def test_no_key_a_codec_builds_comes_from_extra(api: str) -> None:
    """Every key a built-in codec writes is refused from ``extra``, whether this body
    carries it or not; any other key is added without touching what the codec wrote."""
    codec = BUILT_IN_CODECS[api]
    messages = [user_message("hello")]
    plain = codec.build_request(messages, model="chosen")
    for key in sorted(built_by(codec)):
        options = ModelOptions(extra={key: "from-the-spec"})
        with pytest.raises(NotAllowed, match=f"extra\\[{key!r}\\]"):
            codec.build_request(messages, model="chosen", options=options)
    added = codec.build_request(
        messages, model="chosen", options=ModelOptions(extra={"logprobs": True})
    )
    assert added == {**plain, "logprobs": True}
    assert set(plain) <= built_by(codec), "every key the codec wrote is one it declares"


def test_the_capabilities_file_holds_endpoint_rules(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.toml"
    path.write_text(
        '[models.fm]\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = "FM_KEY"\n\n'
        '[endpoint_rules.fm]\nrequest_options = ["user"]\nfile_ids = ["file-1"]\n'
        "only_file_origins = false\n"
    )
    rules = load_capabilities(path).rules_for("fm")
    assert rules == EndpointRules(
        request_options={"user"}, file_ids={"file-1"}, only_file_origins=False
    )
    path.write_text(
        '[models.fm]\nbase_url = "http://127.0.0.1:9/v1"\n\n[endpoint_rules.other]\n'
        'request_options = ["user"]\n'
    )
    with pytest.raises(CapabilitiesFileError, match="endpoint_rules 'other': no registered"):
        load_capabilities(path)
    with pytest.raises(ValueError, match="no setting 'options'"):
        Capabilities(endpoint_rules={"openai": {"options": ["user"]}})


async def _requests(provider: ScriptedProvider, count: int) -> bool:
    return len(provider.requests) >= count


async def _waiting_on(agents: AgentClient, session: str, key: str) -> bool:
    return (await agents.session(session).status()).waiting_for_capacity == key


async def test_an_agent_written_in_python_keeps_its_own_options() -> None:
    """An ``Agent`` is the owner's code: the options it gives its endpoint are admitted
    (its endpoint is registered as ``agent:<name>`` with them), and a spec that copies
    its endpoint may send those and no other."""
    endpoint = ProviderEndpoint(base_url="http://127.0.0.1:9/v1", api_key_env=None)
    options = ModelOptions(extra={"parallel_tool_calls": False})
    model = ModelSpec(name="m", endpoint=endpoint, options=options)
    agent = Agent(name="helper", model=model)
    capabilities = with_agents(Capabilities(), [agent])
    assert await admission_problems(agent.spec(), capabilities, "q", Registry()) == []
    other = model.model_copy(update={"options": ModelOptions(extra={"user": "someone"})})
    problems = await admission_problems(
        agent.spec().model_copy(update={"model": other}), capabilities, "q", Registry()
    )
    assert [p.split(":")[0] for p in problems] == ["model.options.extra['user']"]
