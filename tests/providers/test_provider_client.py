"""The httpx provider client against the scripted provider over real HTTP."""

from __future__ import annotations

import httpx
import pytest

from durable_agent import user_message
from durable_agent._providers import (
    USER_AGENT,
    ProviderClient,
    ProviderEndpoint,
    ProviderError,
    parse_retry_after,
    shared_client,
)
from durable_agent._wire.codecs import build_chat_request
from durable_agent._wire.options import ProviderCompaction
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text, error_reply
from durable_agent.testing._scripted_provider import Reply, json_reply, sse_reply

BODY = build_chat_request([user_message("hi")], model="test-model")
SECRET = "sk-test-secret-value-123"


@pytest.fixture
def provider():  # type: ignore[no-untyped-def]
    with ScriptedProvider() as p:
        yield p


def endpoint(provider: ScriptedProvider, **kw: object) -> ProviderEndpoint:
    return ProviderEndpoint(base_url=provider.base_url, **{"api_key_env": None, **kw})  # type: ignore[arg-type]


async def test_json_and_stream_turns_with_headers(
    provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DA_TEST_KEY", SECRET)
    provider.add(assistant_text("plain"), assistant_calls(("f", {"a": 1}), ids="call_0"))
    ep = endpoint(provider, api_key_env="DA_TEST_KEY")
    client = shared_client()
    assert (await client.complete(ep, BODY)).content == "plain"
    seen: list[str] = []
    streamed = await client.complete(ep, {**BODY, "stream": True}, on_text=seen.append)
    assert streamed.tool_calls and streamed.tool_calls[0].function.arguments == '{"a": 1}'
    first, second = provider.requests
    assert first.path == "/v1/chat/completions" and first.body == BODY
    assert first.headers["User-Agent"] == USER_AGENT
    assert first.headers["Authorization"] == f"Bearer {SECRET}"
    assert second.headers["Accept"] == "text/event-stream" and second.streamed
    assert shared_client() is client


async def test_anthropic_headers(
    provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DA_TEST_KEY", SECRET)
    provider.add(
        json_reply(
            {
                "type": "message",
                "content": [{"type": "text", "text": "hi"}],
                "stop_reason": "end_turn",
            }
        )
    )
    ep = endpoint(provider, api="anthropic", api_key_env="DA_TEST_KEY")
    assert (await ProviderClient().complete(ep, {"model": "c", "messages": []})).content == "hi"
    request = provider.requests[0]
    assert request.path == "/v1/messages" and request.headers["x-api-key"] == SECRET
    assert (
        request.headers["anthropic-version"] == "2023-06-01"
        and "Authorization" not in request.headers
    )


async def test_the_betas_the_owners_compaction_needs_join_the_endpoints_own_once(
    provider: ScriptedProvider,
) -> None:
    provider.add(assistant_text("hi"), assistant_text("hi"))
    compaction = ProviderCompaction(
        strategy="provider", threshold_tokens=60_000, clear_tool_uses={"keep": 2}
    )
    own = {"Anthropic-Beta": "context-management-2025-06-27,files-api-2025-04-14"}
    ep = endpoint(provider, api="anthropic", headers=own, compaction=compaction)
    body = {"model": "c", "messages": [], "max_tokens": 10}
    await ProviderClient().complete(ep, body)
    plain = endpoint(provider, api="anthropic", compaction=compaction)
    await ProviderClient().complete(plain, body)
    first, second = ({k.lower(): v for k, v in r.headers.items()} for r in provider.requests)
    assert first["anthropic-beta"] == (
        "context-management-2025-06-27,files-api-2025-04-14,compact-2026-01-12"
    )
    assert second["anthropic-beta"] == "context-management-2025-06-27,compact-2026-01-12"


@pytest.mark.parametrize(
    ("status", "retryable"),
    [
        (408, True),
        (409, True),
        (429, True),
        (500, True),
        (502, True),
        (503, True),
        (400, False),
        (401, False),
        (403, False),
        (404, False),
        (422, False),
    ],
)
async def test_status_classification_and_what_the_provider_said(
    provider: ScriptedProvider, status: int, retryable: bool
) -> None:
    provider.add(error_reply(status, f"detail for {status}", kind="invalid_request_error"))
    with pytest.raises(ProviderError) as caught:
        await ProviderClient().complete(endpoint(provider), BODY)
    error = caught.value
    assert (error.status_code, error.retryable) == (status, retryable)
    assert f"returned {status}" in str(
        error
    ) and f"invalid_request_error: detail for {status}" in str(error)


async def test_retry_after_is_carried(provider: ScriptedProvider) -> None:
    provider.add(error_reply(429, "slow down", retry_after=7))
    provider.add(Reply(status=503, body=b"upstream down", headers={"retry-after-ms": "1500"}))
    client = ProviderClient()
    for expected in (7.0, 1.5):
        with pytest.raises(ProviderError) as caught:
            await client.complete(endpoint(provider), {**BODY, "stream": True})
        assert caught.value.retry_after == expected and caught.value.retryable
    assert "upstream down" in str(caught.value)


def test_retry_after_http_date() -> None:
    headers = httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert parse_retry_after(headers, now=lambda: 1445412470.0) == 10.0
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None


async def test_missing_key_is_a_clear_non_retryable_error(provider: ScriptedProvider) -> None:
    with pytest.raises(ProviderError) as caught:
        await ProviderClient().complete(endpoint(provider, api_key_env="DA_UNSET_KEY_VAR"), BODY)
    assert not caught.value.retryable and "DA_UNSET_KEY_VAR is not set" in str(caught.value)
    assert provider.requests == []


async def test_key_never_appears_in_errors(
    provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DA_TEST_KEY", SECRET)
    provider.add(error_reply(401, "Incorrect API key provided"))
    with pytest.raises(ProviderError) as caught:
        await ProviderClient().complete(endpoint(provider, api_key_env="DA_TEST_KEY"), BODY)
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.__dict__)


def test_secrets_cannot_be_put_in_endpoint_headers() -> None:
    with pytest.raises(ValueError, match="api_key_env"):
        ProviderEndpoint(headers={"Authorization": "Bearer x"})


async def test_transport_faults_are_retryable(provider: ScriptedProvider) -> None:
    provider.add(Reply(reset=True), Reply(delay=1.0, body=b"{}"))
    client = ProviderClient()
    with pytest.raises(ProviderError) as reset:
        await client.complete(endpoint(provider), BODY)
    with pytest.raises(ProviderError) as timeout:
        await client.complete(endpoint(provider, read_timeout=0.2), BODY)
    assert reset.value.retryable and timeout.value.retryable
    assert "ReadTimeout" in str(timeout.value)


async def test_stream_faults_become_error_turns(provider: ScriptedProvider) -> None:
    provider.add(
        sse_reply([{"choices": [{"index": 0, "delta": {"content": "part"}}]}], cut=True),
        sse_reply([], done=True),
        sse_reply([b"data: {not json\n\n"]),
    )
    client = ProviderClient()
    cut = await client.complete(endpoint(provider), {**BODY, "stream": True})
    empty = await client.complete(endpoint(provider), {**BODY, "stream": True})
    bad = await client.complete(endpoint(provider), {**BODY, "stream": True})
    assert (
        cut.is_error and cut.content == "part" and cut.error and "RemoteProtocolError" in cut.error
    )
    assert empty.is_error and empty.error and "empty completion" in empty.error
    assert bad.is_error and bad.error and "malformed JSON" in bad.error
