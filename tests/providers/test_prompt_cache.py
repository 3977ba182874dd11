"""Asking for the provider's prompt cache on every wire that has one: OpenAI's
``prompt_cache_key`` (Chat Completions, Responses), Anthropic's ``cache_control``
breakpoints; none when caching is off; the request bodies valid for each official SDK;
through the real worker, one key per session; and spend that prices cached reads and
cache writes apart."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, Registry, tool
from durable_agent._spec.document import ModelPrice
from durable_agent._wire.codecs import build_request, built_in_codec
from durable_agent._wire.messages import ToolDefinition, Usage, user_message
from durable_agent._wire.options import ModelOptions, with_prompt_cache
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import running_worker, spec_for
from tests.support.sdk_types import validate_request

TOOLS = [
    ToolDefinition(name="a", description="first", parameters={"type": "object"}),
    ToolDefinition(name="b", description="second", parameters={"type": "object"}),
]

#: Whether each built-in wire has the cache fields, as its codec declares.
CACHES = {api: built_in_codec(api).caches_prompts for api in ("chat", "anthropic", "embeddings")}


def body_for(api: str, options: ModelOptions) -> dict[str, Any]:
    from durable_agent._wire.messages import SystemMessage

    messages = [SystemMessage(content="Be brief."), user_message("hello")]
    return build_request(api, messages, model="m", tools=TOOLS, options=options)  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_the_cache_fields_on_each_wire_and_none_when_off(api: str) -> None:
    on = body_for(api, ModelOptions(prompt_cache_key="k1"))
    off = body_for(api, ModelOptions())
    validate_request(api, on)
    assert "cache_control" not in json.dumps(off) and "prompt_cache_key" not in off
    if api in ("chat", "responses"):
        assert on["prompt_cache_key"] == "k1" and "cache_control" not in json.dumps(on)
    else:
        assert "prompt_cache_key" not in on
        assert on["tools"][-1]["cache_control"] == {"type": "ephemeral"}
        assert "cache_control" not in on["tools"][0]
        assert on["system"] == [
            {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
        ]
        assert on["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert json.dumps(on).count("cache_control") <= 4, "at most the four the API allows"


def test_caching_is_on_where_the_provider_takes_it_and_as_the_spec_says() -> None:
    auto = ModelOptions()
    openai = with_prompt_cache(
        auto, CACHES["chat"], "https://api.openai.com/v1", "s-1", None, SECRET
    )
    other = with_prompt_cache(auto, CACHES["chat"], "http://127.0.0.1:8000/v1", "s-1", None, SECRET)
    anthropic = with_prompt_cache(
        auto, CACHES["anthropic"], "https://api.anthropic.com", "s-1", None, SECRET
    )
    forced = with_prompt_cache(
        ModelOptions(prompt_cache=True), CACHES["chat"], "http://x/v1", "s-1", None, SECRET
    )
    refused = with_prompt_cache(
        ModelOptions(prompt_cache=False),
        CACHES["chat"],
        "https://api.openai.com/v1",
        "s-1",
        None,
        SECRET,
    )
    embeddings = with_prompt_cache(
        auto, CACHES["embeddings"], "https://api.openai.com/v1", "s-1", None, SECRET
    )
    assert openai.prompt_cache_key and anthropic.prompt_cache_key and forced.prompt_cache_key
    assert other.prompt_cache_key is None and refused.prompt_cache_key is None
    assert embeddings.prompt_cache_key is None, "a wire without caching gets none"
    swarm = with_prompt_cache(
        auto, CACHES["chat"], "https://api.openai.com/v1", "s-1", "billing", SECRET
    )
    assert swarm.prompt_cache_key != openai.prompt_cache_key, "one per agent in a swarm"
    assert "s-1" not in str(openai.prompt_cache_key), "the session id never leaves"


SECRET = b"the workers' secret"


@tool
def lookup(city: str) -> str:
    """Weather."""
    return "4C"


async def test_one_key_per_session_through_the_worker(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_calls(("lookup", {"city": "Oslo"})), assistant_text("4C")] * 2
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["lookup"])
        model = spec.model.model_copy(update={"options": ModelOptions(prompt_cache=True)})
        spec = spec.model_copy(update={"model": model})
        async with running_worker(temporal_env, task_queue, Registry([lookup])):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            for _ in range(2):
                sid = await agents.start(spec, "weather?")
                await asyncio.wait_for(agents.session(sid).result(), 60)
    keys = [r.body.get("prompt_cache_key") for r in provider.requests]
    assert keys[0] and keys[0] == keys[1], "a session's calls share its key"
    assert keys[2] == keys[3] and keys[2] != keys[0], "another session, another key"


def test_spend_prices_cached_reads_and_cache_writes_apart() -> None:
    price = ModelPrice(
        input_per_million=3.0,
        output_per_million=15.0,
        cached_input_per_million=0.3,
        cache_write_per_million=3.75,
    )
    usage = Usage(
        prompt_tokens=10_000, completion_tokens=100, cached_tokens=8_000, cache_write_tokens=1_500
    )
    expected = (500 * 3.0 + 8_000 * 0.3 + 1_500 * 3.75 + 100 * 15.0) / 1_000_000
    assert price.cost_usd(usage) == pytest.approx(expected)
    plain = ModelPrice(input_per_million=3.0, output_per_million=15.0)
    assert plain.cost_usd(usage) == pytest.approx((10_000 * 3.0 + 100 * 15.0) / 1_000_000)


def test_anthropic_usage_counts_cache_reads_and_writes_in_the_prompt() -> None:
    codec = built_in_codec("anthropic")
    body = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 50,
            "cache_read_input_tokens": 9_000,
            "cache_creation_input_tokens": 1_000,
            "output_tokens": 20,
        },
    }
    usage = codec.parse_response(body).usage
    assert usage is not None
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cache_write_tokens) == (
        10_050,
        9_000,
        1_000,
    )


async def test_spend_equals_the_bill_with_cached_reads_across_continue_as_new(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Six turns, each reply reporting what the provider's cache served; the session
    continues as new between them. Its spend is what the provider billed, cached reads
    at their price, to the token."""
    usages = [
        Usage(prompt_tokens=2_000 + 500 * k, completion_tokens=40, cached_tokens=1_024 * (k > 0))
        for k in range(6)
    ]
    script = [assistant_text(f"answer {k}", usage=u) for k, u in enumerate(usages)]
    price = ModelPrice(input_per_million=2.5, cached_input_per_million=1.25, output_per_million=10)
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, session={"continue_as_new_after_events": 20})
        spec = spec.model_copy(update={"model": spec.model.model_copy(update={"price": price})})
        spec = spec.model_copy(update={"stop": spec.stop.model_copy(update={"max_cost_usd": 100})})
        async with running_worker(temporal_env, task_queue, Registry()):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            session = agents.session(await agents.start(spec, "question 0"))
            await session.wait(timeout=60)
            for k in range(1, 6):
                after = len(await session.messages())
                await session.send(f"question {k}")
                await session.wait(after=after, timeout=60)
            status = await session.status()
            await session.end()
    assert status.runs > 1, "the session continued as new"
    [spent] = status.spend.values()
    billed = sum(usages, Usage())
    assert spent.usage.prompt_tokens == billed.prompt_tokens
    assert spent.usage.cached_tokens == billed.cached_tokens == 5 * 1_024
    assert spent.cost_usd == pytest.approx(price.cost_usd(billed), abs=1e-12)
    assert status.budget.cost_usd == pytest.approx(price.cost_usd(billed), abs=1e-12)
    assert spent.cost_usd < ModelPrice(input_per_million=2.5, output_per_million=10).cost_usd(
        billed
    ), "cached reads cost less"


def anthropic_reply(text: str, fresh: int, read: int, written: int) -> Any:
    from durable_agent.testing._scripted_provider import json_reply

    return json_reply(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": fresh,
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": written,
                "output_tokens": 30,
            },
        }
    )


async def test_spend_equals_an_anthropic_bill_with_cache_writes_across_continue_as_new(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Anthropic bills cache writes above the input price and reads far below it; four
    turns across continue-as-new: the session's spend is the bill, to the token."""
    turns = [(1_500, 0, 2_000), (200, 2_000, 600), (180, 2_600, 500), (210, 3_100, 450)]
    script = [anthropic_reply(f"answer {k}", *t) for k, t in enumerate(turns)]
    price = ModelPrice(
        input_per_million=3.0,
        cached_input_per_million=0.3,
        cache_write_per_million=3.75,
        output_per_million=15.0,
    )
    billed = sum(
        (
            price.cost_usd(
                Usage(
                    prompt_tokens=f + r + w,
                    completion_tokens=30,
                    cached_tokens=r,
                    cache_write_tokens=w,
                )
            )
            for f, r, w in turns
        ),
        0.0,
    )
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, session={"continue_as_new_after_events": 20})
        endpoint = spec.model.endpoint.model_copy(update={"api": "anthropic"})  # type: ignore[union-attr]
        model = spec.model.model_copy(
            update={"price": price, "endpoint": endpoint, "stream": False}
        )
        spec = spec.model_copy(update={"model": model})
        spec = spec.model_copy(update={"stop": spec.stop.model_copy(update={"max_cost_usd": 100})})
        async with running_worker(temporal_env, task_queue, Registry()):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            session = agents.session(await agents.start(spec, "question 0"))
            await session.wait(timeout=60)
            for k in range(1, len(turns)):
                after = (await session.status()).message_count
                await session.send(f"question {k}")
                await session.wait(after=after, timeout=60)
            status = await session.status()
            await session.end()
    assert status.runs > 1, "the session continued as new"
    [spent] = status.spend.values()
    assert spent.usage.cached_tokens == sum(r for _, r, _ in turns)
    assert spent.usage.cache_write_tokens == sum(w for _, _, w in turns)
    assert spent.usage.prompt_tokens == sum(f + r + w for f, r, w in turns)
    assert spent.cost_usd == pytest.approx(billed, abs=1e-12)
    assert status.budget.cost_usd == pytest.approx(billed, abs=1e-12), "the budget counts it"
