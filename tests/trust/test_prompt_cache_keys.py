"""A prompt cache key is the worker's: a spec that names one (as an option or through
``extra``) is refused at start and the model is never asked, and the key the worker
sends is a keyed digest no client can compute from the session's id and agent, so no
session can aim at another's cache."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import built_in_codec
from durable_agent._wire.options import ModelOptions, with_prompt_cache
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.support.agent_harness import running_worker, spec_for
from tests.trust.test_capabilities import refused, registered

VICTIM = hashlib.sha256(b"victim-session\0").hexdigest()[:32]

#: Whether each built-in wire has the cache fields, as its codec declares.
CACHES = {api: built_in_codec(api).caches_prompts for api in ("chat", "anthropic", "embeddings")}


@pytest.mark.parametrize(
    "options",
    [{"prompt_cache_key": VICTIM}, {"extra": {"prompt_cache_key": VICTIM}}],
    ids=["option", "extra"],
)
async def test_a_spec_naming_a_cache_key_is_refused_and_asks_nothing(
    temporal_env: WorkflowEnvironment, task_queue: str, options: dict[str, Any]
) -> None:
    with ScriptedProvider([assistant_text("never")]) as provider:
        spec = spec_for(provider)
        model = spec.model.model_copy(
            update={"options": ModelOptions(prompt_cache=True, **options)}
        )
        text = await refused(
            temporal_env, task_queue, spec.model_copy(update={"model": model}), registered(provider)
        )
    assert "model.options.prompt_cache_key: the worker derives each session's cache key" in text
    assert provider.requests == [], "the model was never asked"


async def test_the_key_sent_is_not_one_a_client_can_compute(
    temporal_env: WorkflowEnvironment, task_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DURABLE_AGENT_CACHE_KEY_SECRET", "the fleet's secret")
    with ScriptedProvider([assistant_text("hi")]) as provider:
        spec = spec_for(provider)
        model = spec.model.model_copy(update={"options": ModelOptions(prompt_cache=True)})
        spec = spec.model_copy(update={"model": model})
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "hello")
            await agents.session(sid).result()
    sent = provider.requests[0].body["prompt_cache_key"]
    guessable = hashlib.sha256(f"{sid}\0".encode()).hexdigest()[:32]
    assert sent and sent != guessable and sid not in sent
    # the same secret on any worker of the fleet gives the same key (one cache)
    again = with_prompt_cache(
        ModelOptions(prompt_cache=True),
        CACHES["chat"],
        "http://x/v1",
        sid,
        None,
        b"the fleet's secret",
    )
    assert again.prompt_cache_key == sent


def test_a_key_a_spec_carried_past_admission_is_never_sent() -> None:
    """A continued run's input is anyone's to write; the worker drops what it carries
    whether caching is on or off."""
    carried = ModelOptions(prompt_cache_key=VICTIM, extra={"prompt_cache_key": VICTIM})
    for cache in (True, False):
        sent = with_prompt_cache(
            carried.model_copy(update={"prompt_cache": cache}),
            CACHES["chat"],
            "http://x/v1",
            "s",
            None,
            b"k",
        )
        assert sent.prompt_cache_key != VICTIM and "prompt_cache_key" not in sent.extra
