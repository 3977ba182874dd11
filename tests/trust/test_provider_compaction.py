"""Whose compaction runs is the endpoint owner's choice: a spec can neither turn the
provider's on nor change its settings, and a provider's compaction item, which stands
for the conversation before it, reaches no endpoint but the one that made it, and no
log line."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._connection import ServerSettings, connect_client
from durable_agent._payloads.encryption import CodecKeys
from durable_agent._spec.document import AgentInput, AgentSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import built_by, built_in_codec
from durable_agent._wire.messages import AssistantMessage
from durable_agent._wire.options import ProviderCompaction
from durable_agent.capabilities import Capabilities
from durable_agent.capabilities._registry import SpecPolicy
from durable_agent.testing import ScriptedProvider, assistant_text, error_reply
from durable_agent.testing._in_process import InProcessRun
from durable_agent.testing._scripted_provider import RecordedRequest, Reply
from durable_agent.testing._server_compaction import ServerCompaction
from tests.support.agent_harness import start_worker_process

HOST = "http://127.0.0.1:9/v1"
MANAGED = ProviderCompaction(strategy="provider", threshold_tokens=50_000)


def _owner() -> Capabilities:
    return Capabilities(
        models={
            "plain": ProviderEndpoint(api="responses", base_url=HOST, api_key_env=None),
            "managed": ProviderEndpoint(
                api="anthropic",
                base_url="http://127.0.0.1:10/v1",
                api_key_env=None,
                compaction=MANAGED,
            ),
        },
        policy=SpecPolicy(inline_endpoints=True, private_network=True),
    )


async def test_a_spec_cannot_turn_on_provider_compaction_or_change_its_settings() -> None:
    owner = _owner()
    louder = ProviderCompaction(strategy="both", threshold_tokens=1_000)
    # an inline copy of a registered endpoint takes the registered one's setting
    copy = owner.models["plain"].model_copy(update={"compaction": louder})
    assert (await owner.endpoint(copy)).compaction is None
    changed = owner.models["managed"].model_copy(update={"compaction": louder})
    assert (await owner.endpoint(changed)).compaction == MANAGED
    # an endpoint a spec gives itself (a development policy) gets none
    own = ProviderEndpoint(
        api="responses", base_url="http://127.0.0.1:11/v1", api_key_env=None, compaction=louder
    )
    assert (await owner.endpoint(own)).compaction is None
    # nor can a request option carry the field the provider reads
    for api in ("responses", "anthropic"):
        built = built_by(built_in_codec(api))
        problems = owner.option_problems("plain", ["context_management"], built)
        assert problems and "builds 'context_management' itself" in problems[0]

    # in effect: the request the copy sends asks the provider for nothing
    spec = AgentSpec.model_validate(
        {"model": {"name": "m", "endpoint": copy.model_dump(), "stream": False}}
    )
    bodies: list[dict[str, Any]] = []

    def model(body: dict[str, Any]) -> AssistantMessage:
        bodies.append(body)
        return assistant_text("ok")

    run = InProcessRun(spec=spec, registry=Registry(), model=model, capabilities=owner)
    await run.run(AgentInput(spec=spec, message="hello"))
    assert bodies and all("context_management" not in b for b in bodies)


CANARY = f"cmp-canary-{secrets.token_hex(8)}"
BIG = "the first question, told at length. " * 200


class Primary:
    """The endpoint whose owner chose the provider's compaction: a Responses server that
    compacts past its threshold (its item's content is the canary), and that is
    overloaded when told to be."""

    def __init__(self) -> None:
        self.server = ServerCompaction("responses")
        self.overloaded = False
        self.item: dict[str, Any] | None = None

    def __call__(self, request: RecordedRequest) -> AssistantMessage | Reply:
        if self.overloaded:
            return error_reply(503, "overloaded")
        served = self.server.serve(request.body)
        if served.made is not None:
            served.made["encrypted_content"] = CANARY
            self.item = served.made
        return self.server.reply(assistant_text("noted"), served)


@pytest.mark.timeout(300)
async def test_the_item_survives_continue_as_new_and_reaches_no_other_endpoint_or_log(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    primary = Primary()
    with (
        ScriptedProvider(responder=primary) as managed,
        ScriptedProvider(responder=lambda _: assistant_text("from elsewhere")) as other,
    ):
        caps = tmp_path / "capabilities.json"
        settings = {"strategy": "provider", "threshold_tokens": 1_000}
        caps.write_text(
            json.dumps(
                {
                    "models": {
                        "managed": {
                            "api": "responses",
                            "base_url": managed.base_url,
                            "api_key_env": None,
                            "compaction": settings,
                        },
                        "other": {"base_url": other.base_url, "api_key_env": None},
                    }
                }
            )
        )
        log = tmp_path / "worker.log"
        # as in production: history encrypted, so the worker's log holds no user or
        # model text (``tests/trust/test_log_canaries.py``)
        keys = CodecKeys.generate("k1")
        address = str(temporal_env.client.service_client.config.target_host)
        client = await connect_client(ServerSettings(address, codec_keys=CodecKeys.parse(keys)))
        worker = start_worker_process(
            temporal_env,
            task_queue,
            "--capabilities",
            str(caps),
            "--log-level",
            "info",
            stderr=log,
            trust_specs=False,
            DURABLE_AGENT_CODEC_KEYS=keys,
        )
        try:
            spec = AgentSpec.model_validate(
                {
                    "model": {
                        "name": "m",
                        "endpoint": "managed",
                        "stream": False,
                        "max_attempts": 1,
                        "fallbacks": [{"name": "m2", "endpoint": "other", "max_attempts": 1}],
                    },
                    "session": {"continue_as_new_after_events": 20},
                }
            )
            agents = AgentClient(client, task_queue=task_queue)
            session_id = await agents.start(spec, BIG)
            session = agents.session(session_id)
            await session.wait(timeout=60)
            assert primary.item is not None  # the first request was past the threshold
            for turn in range(1, 5):
                after = (await session.status()).message_count
                await session.send(f"question {turn}")
                await session.wait(after=after, timeout=60)
            handle = client.get_workflow_handle(session_id)
            info = (await handle.describe()).raw_description.workflow_execution_info
            assert info.execution.run_id != info.first_run_id  # it continued as new
            # after continue-as-new the managed endpoint is still sent the item first,
            # verbatim, and not what it stands for
            latest = managed.requests[-1].body
            assert latest["input"][0] == primary.item
            assert "told at length" not in json.dumps(latest)

            # the managed endpoint is overloaded: the fallback, another endpoint, answers
            primary.overloaded = True
            after = (await session.status()).message_count
            await session.send("question 5")
            await session.wait(after=after, timeout=60)
            messages = await session.messages()
            assert messages[-1].content == "from elsewhere"  # type: ignore[union-attr]
            sent = json.dumps(other.requests[-1].body)
            assert CANARY not in sent and "compaction" not in sent
            assert "told at length" in sent  # it is sent the whole window instead
            await session.end()
        finally:
            worker.terminate()
            worker.wait(15)
    text = log.read_text()
    assert "model turn" in text  # the worker logged its calls ...
    assert CANARY not in text  # ... and never the item
