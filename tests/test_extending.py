"""The manual's page on extending durable-agent, run as written: its code blocks are
executed here, and what they register works through the real provider client and a
real workflow."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from durable_agent import user_message
from durable_agent.core import ProviderEndpoint
from durable_agent.core.codecs import Codec, codec_for, register_codec, registered_apis
from durable_agent.providers import ProviderClient
from durable_agent.testing import ScriptedProvider, json_reply
from durable_agent.tools import ToolRegistry
from tests.support.agent_harness import running_worker, spec_for, start_session
from tests.support.docs_page import page_block, run_page_block

OLLAMA_REPLY = {"message": {"role": "assistant", "content": "Hei!"}, "done": True}


def test_an_unknown_api_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(ValidationError) as refused:
        ProviderEndpoint(api="gemini", base_url="http://127.0.0.1:1")
    text = str(refused.value)
    assert "unknown wire API 'gemini': registered APIs are " in text
    assert re.search(r"anthropic, chat, .*responses", text), text


def test_a_name_is_registered_once() -> None:
    codec = codec_for("chat")
    register_codec("chat", codec)  # the same codec again changes nothing
    other = Codec("chat", "/x", lambda *a, **k: {}, codec.parse_response, list, provider_name="x")
    with pytest.raises(ValueError, match="wire API 'chat' is registered already"):
        register_codec("chat", other)


async def test_the_pages_wire_api_goes_over_http_as_written() -> None:
    run_page_block("## A new wire API")
    assert "ollama" in registered_apis()
    endpoint = ProviderEndpoint.model_validate_json(page_block("An endpoint then names", "json"))
    assert endpoint.api == "ollama"
    with ScriptedProvider([json_reply(OLLAMA_REPLY)]) as provider:
        endpoint = endpoint.model_copy(update={"base_url": provider.base_url})
        body = codec_for("ollama").build_request([user_message("Hallo?")], model="llama3.2")
        client = ProviderClient()
        try:
            message = await client.complete(endpoint, body)
        finally:
            await client.aclose()
    [request] = provider.requests
    assert request.path == "/v1/chat"
    assert request.body == {
        "model": "llama3.2",
        "messages": [{"role": "user", "content": "Hallo?"}],
        "stream": False,
    }
    assert "authorization" not in {h.lower() for h in request.headers}
    assert message.content == "Hei!" and message.finish_reason == "stop"


async def test_a_session_on_the_pages_wire_api(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    run_page_block("## A new wire API")
    with ScriptedProvider([json_reply(OLLAMA_REPLY)]) as provider:
        spec = spec_for(provider)
        endpoint = spec.model.endpoint.model_copy(update={"api": "ollama"})
        model = spec.model.model_copy(update={"endpoint": endpoint, "stream": False})
        spec = spec.model_copy(update={"model": model})
        async with running_worker(temporal_env, task_queue, ToolRegistry()) as client:
            result = await (await start_session(client, task_queue, spec, "Hallo?")).result()
    assert result.status == "done" and result.final is not None
    assert result.final.content == "Hei!"
    assert provider.requests[0].body["messages"][-1] == {"role": "user", "content": "Hallo?"}
