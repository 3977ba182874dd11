"""The manual's page on extending durable-agent, run as written: its code blocks are
executed here, and what they register works through the real provider client and a
real workflow."""

from __future__ import annotations

import re
import sys
import types
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from durable_agent import audio_part, user_message
from durable_agent._errors import Failure
from durable_agent._providers import ProviderClient
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import WireCodec, built_in_codec
from durable_agent._wire.options import ModelOptions
from durable_agent._wire.outgoing import ModelInputs
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import json_reply
from tests.support.agent_harness import running_worker, spec_for, start_session
from tests.support.docs_page import EXTENDING, page_block, run_page_block

OLLAMA_REPLY = {"message": {"role": "assistant", "content": "Hei!"}, "done": True}


def test_an_unknown_api_is_refused_naming_the_ones_the_worker_speaks() -> None:
    with pytest.raises(ValueError) as refused:
        Registry().codec("gemini")
    text = str(refused.value)
    assert "unknown wire API 'gemini': this worker speaks " in text
    assert re.search(r"anthropic, chat, .*responses", text), text
    with pytest.raises(ValidationError, match="should match pattern"):
        ProviderEndpoint(api="chat completions", base_url="http://127.0.0.1:1")


async def test_a_session_on_an_api_its_worker_does_not_speak_is_refused_before_any_call(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([json_reply(OLLAMA_REPLY)]) as provider:
        spec = spec_for(provider)
        endpoint = spec.model.endpoint.model_copy(update={"api": "gemini"})
        spec = spec.model_copy(
            update={"model": spec.model.model_copy(update={"endpoint": endpoint})}
        )
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            handle = await start_session(client, task_queue, spec, "Hallo?")
            with pytest.raises(WorkflowFailureError) as failed:
                await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == Failure.NOT_ADMITTED
    assert "model.endpoint.api: this worker does not speak the wire API 'gemini'" in cause.message
    assert provider.requests == []  # refused before any model call


def test_a_name_holds_one_codec() -> None:
    codec = built_in_codec("chat")
    registry = Registry([codec])  # the same codec again changes nothing
    other = WireCodec("chat", "/x", lambda *a, **k: {}, codec.parse_response, provider_name="x")
    with pytest.raises(ValueError, match="a different wire API named 'chat'"):
        registry.add(other)
    assert registry.codec("chat") is codec


async def test_the_pages_wire_api_goes_over_http_as_written() -> None:
    ollama = run_page_block("## A new wire API")["ollama"]
    assert "ollama" in Registry([ollama]).apis()
    endpoint = ProviderEndpoint.model_validate_json(page_block("An endpoint then names", "json"))
    assert endpoint.api == "ollama"
    with ScriptedProvider([json_reply(OLLAMA_REPLY)]) as provider:
        endpoint = endpoint.model_copy(update={"base_url": provider.base_url})
        body = ollama.build_request([user_message("Hallo?")], model="llama3.2")
        client = ProviderClient()
        try:
            message = await client.complete(endpoint, body, codec=ollama)
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
    ollama = run_page_block("## A new wire API")["ollama"]
    with ScriptedProvider([json_reply(OLLAMA_REPLY)]) as provider:
        spec = spec_for(provider)
        endpoint = spec.model.endpoint.model_copy(update={"api": "ollama"})
        model = spec.model.model_copy(update={"endpoint": endpoint, "stream": False})
        spec = spec.model_copy(update={"model": model})
        async with running_worker(temporal_env, task_queue, Registry([ollama])) as client:
            result = await (await start_session(client, task_queue, spec, "Hallo?")).result()
    assert result.status == "done" and result.final is not None
    assert result.final.content == "Hei!"
    assert provider.requests[0].body["messages"][-1] == {"role": "user", "content": "Hallo?"}


async def test_an_owners_wire_api_gets_what_its_codec_declares(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """A codec the owner registers takes part in all the worker does around the body,
    as the built-in ones do, from what it declares: the kinds of part it carries (audio
    left out with a marker), the prompt-cache key, and how a JSON object is asked for.
    Its name is nothing the worker knows."""
    chat = built_in_codec("chat")
    asked: list[dict[str, object]] = []

    def ask(body: dict[str, object], schema: dict[str, object]) -> None:
        asked.append(schema)
        body["json_wanted"] = True

    mine = WireCodec(
        "house-chat",
        "/chat/completions",
        lambda messages, **fields: chat.build_request(messages, **fields),
        chat.parse_response,
        provider_name="house",
        takes={"image"},
        caches_prompts=True,
        json_object=ask,
    )
    with ScriptedProvider([assistant_text('{"city": "Oslo"}')]) as provider:
        spec = spec_for(provider)
        endpoint = spec.model.endpoint.model_copy(update={"api": "house-chat"})
        model = spec.model.model_copy(
            update={
                "endpoint": endpoint,
                "stream": False,
                "options": ModelOptions(prompt_cache=True),
                "inputs": ModelInputs(structured_output="json_object"),
            }
        )
        schema = {"type": "object", "properties": {"city": {"type": "string"}}}
        spec = spec.model_copy(update={"model": model, "output_schema": schema})
        message = user_message("Where?", audio_part(b"RIFF....WAVE", "audio/wav"))
        async with running_worker(temporal_env, task_queue, Registry([mine])) as client:
            result = await (await start_session(client, task_queue, spec, message)).result()
    assert result.status == "done", result
    [request] = provider.requests
    sent = request.body["messages"][-2]["content"]
    assert {"type": "text", "text": "[audio omitted: this model takes no audio]"} in sent
    assert not [p for p in sent if p.get("type") == "input_audio"]
    assert request.body.get("prompt_cache_key"), "the cache key its codec has a field for"
    assert request.body["json_wanted"] is True and asked == [schema]
    # the same codec declaring nothing gets none of it
    plain = WireCodec("plain", "/x", mine.build_request, mine.parse_response, provider_name="p")
    assert plain.takes == frozenset() and not plain.caches_prompts and not plain.takes_file_urls
    body: dict[str, object] = {}
    plain.ask_json_object(body, schema)
    assert body == {}


def _page_tests() -> dict[str, Any]:
    """The page's block on testing a codec, run as a module of its own that holds the
    page's codec, as the reader's module does."""
    module = types.ModuleType("docs_page_testing_a_codec")
    module.ollama = run_page_block("## A new wire API")["ollama"]  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    code = page_block("### Testing a codec")
    exec(compile(code, str(EXTENDING), "exec"), module.__dict__)
    return module.__dict__


async def test_the_pages_ollama_codec_answers_in_process() -> None:
    """``run_in_process(..., registry=Registry([ollama]))``: the request is the codec's
    (the page's test asserts its body), and the answer comes back."""
    await _page_tests()["test_the_codec_in_process"]()


async def test_the_pages_ollama_codec_answers_end_to_end_at_once() -> None:
    """``AgentTestEnvironment(registry=Registry([ollama]))``: the scripted model answers
    in Ollama's shape, by the codec's ``reply``, so the first request is answered (the
    page's test asserts there was one request: no retry)."""
    await _page_tests()["test_the_codec_end_to_end"]()


def test_the_codec_names_the_manual_gives_are_importable() -> None:
    import durable_agent.extending as extending

    for name in ("Codec", "StreamingCodec", "StreamingWireCodec", "WireCodec"):
        assert name in extending.__all__ and getattr(extending, name) is not None
    ollama = run_page_block("## A new wire API")["ollama"]
    assert isinstance(ollama, extending.Codec)
    assert not isinstance(ollama, extending.StreamingCodec)
    assert isinstance(built_in_codec("chat"), extending.StreamingWireCodec)
