"""Hosted tools on the wire, as pure functions: a reply's items kept whole whether it
came streamed or whole, counted in its usage, and read for display; a spec's options
checked against the owner's by each rule."""

from __future__ import annotations

import json
from pathlib import Path

from durable_agent._wire.codecs import (
    build_request,
    built_in_codec,
    parse_response,
    stream_to_message,
)
from durable_agent._wire.codecs.common import hosted_as_sent
from durable_agent._wire.messages import AssistantMessage, hosted_calls, user_message
from durable_agent._wire.outgoing import compaction_window
from durable_agent.capabilities import load_capabilities
from tests.support.hosted_replies import anthropic_searched, responses_searched


def _sse(events: list[dict[str, object]]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def _round_trip(api: str, message: AssistantMessage) -> tuple[AssistantMessage, AssistantMessage]:
    codec = built_in_codec(api)
    whole = parse_response(api, codec.reply_body(message) or {})
    streamed = stream_to_message(api, _sse(codec.reply_events(message) or []))
    return whole, streamed


def test_a_replys_hosted_items_are_kept_whole_streamed_or_not() -> None:
    for api, message in [
        ("responses", responses_searched("Sunny.", "weather")),
        ("anthropic", anthropic_searched("Sunny.", "weather")),
    ]:
        whole, streamed = _round_trip(api, message)
        for got in (whole, streamed):
            assert got.provider_items == message.provider_items, api
            assert got.content == "Sunny."
            assert got.usage is not None and got.usage.hosted_calls == {"web_search": 1}


def test_the_responses_stream_names_each_hosted_call_as_the_api_does() -> None:
    events = built_in_codec("responses").reply_events(responses_searched("Hi.", "q")) or []
    kinds = [e["type"] for e in events]
    assert kinds[1:5] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.completed",
        "response.output_item.done",
    ]


def test_a_hosted_call_is_read_for_people_with_its_outcome() -> None:
    anthropic = anthropic_searched("Hi.", "oslo weather").provider_items
    assert [c.model_dump() for c in hosted_calls(anthropic)] == [
        {"id": "srvtoolu_1", "name": "web_search", "status": "completed", "detail": "oslo weather"}
    ]
    assert anthropic is not None
    use, result, text = anthropic.items
    failed = {**result, "content": {"type": "web_search_tool_result_error", "error_code": "x"}}
    unanswered = anthropic.model_copy(update={"items": [use, text]})
    assert hosted_calls(anthropic.model_copy(update={"items": [use, failed]}))[0].status == "failed"
    assert hosted_calls(unanswered)[0].status == "incomplete"
    hidden = anthropic.model_copy(update={"items": [{**use, "input": {"query": "a\u202eb"}}]})
    assert hosted_calls(hidden)[0].detail == "a\\u202eb", "hidden characters show"


def test_each_rule_narrows_and_never_widens() -> None:
    rules = {
        "allowed_domains": "narrower",
        "blocked_domains": "wider",
        "max_uses": "at_most",
        "vector_store_ids": "among",
        "user_location": "any",
    }
    owner = {"allowed_domains": ["example.com"], "blocked_domains": ["bad.com"], "max_uses": 3}
    sent, problems = hosted_as_sent(
        "t",
        {"allowed_domains": ["a.example.com"], "blocked_domains": ["bad.com", "worse.com"]},
        owner,
        rules,  # type: ignore[arg-type]
    )
    assert problems == []
    assert sent == {
        "allowed_domains": ["a.example.com"],
        "blocked_domains": ["bad.com", "worse.com"],
        "max_uses": 3,
    }
    asked = {
        "allowed_domains": ["notexample.com"],
        "blocked_domains": [],
        "max_uses": 4,
        "vector_store_ids": ["vs_1"],
        "container": {"type": "auto"},
    }
    _, problems = hosted_as_sent("t", asked, owner, rules)  # type: ignore[arg-type]
    said = ["allowed_domains", "blocked_domains", "max_uses", "vector_store_ids", "container.type"]
    assert [p.split(":")[0] for p in problems] == [
        f"hosted_tools['t'].options.{k}" for k in said
    ], problems


def test_the_capabilities_file_allows_a_hosted_tool(tmp_path: Path) -> None:
    path = tmp_path / "capabilities.toml"
    path.write_text(
        '[models.openai]\napi = "responses"\n\n[endpoint_rules.openai]\n'
        'hosted_tools = { web_search = { filters = { allowed_domains = ["who.int"] } } }\n'
    )
    rules = load_capabilities(path).rules_for("openai")
    assert rules.hosted_tools == {"web_search": {"filters": {"allowed_domains": ["who.int"]}}}


def test_no_other_wire_receives_a_replys_hosted_items() -> None:
    said = [user_message("weather?"), responses_searched("Sunny.", "weather"), user_message("ok")]
    for api in ("chat", "anthropic"):
        body = json.dumps(build_request(api, said, model="m"))
        assert "ws_1" not in body and "url_citation" not in body and "Sunny." in body, api
    assert "ws_1" in json.dumps(build_request("responses", said, model="m"))


def test_a_replys_hosted_items_go_only_to_the_endpoint_that_made_them() -> None:
    """The worker marks a reply's items with its endpoint; a request to another
    endpoint of the same wire (a fallback at another provider) has none of them, only
    the turn's text, and one to the same endpoint has them in their place."""
    here, elsewhere = "http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"
    searched = responses_searched("Sunny.", "weather")
    assert searched.provider_items is not None
    marked = searched.model_copy(
        update={"provider_items": searched.provider_items.model_copy(update={"endpoint": here})}
    )
    said = [user_message("weather?"), marked, user_message("ok")]
    other = json.dumps(
        build_request("responses", compaction_window(said, "responses", elsewhere), model="m")
    )
    assert "ws_1" not in other and "url_citation" not in other and "Sunny." in other
    same = build_request("responses", compaction_window(said, "responses", here), model="m")
    assert same["input"][1:3] == searched.provider_items.items


def test_a_reply_that_compacted_and_searched_keeps_each_item_once() -> None:
    """A Responses reply whose output holds both the provider's compaction item and a
    hosted call: the compaction item is the message's compaction, the call its
    provider items, and a request to its endpoint sends each once, the compaction first."""
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}
    body = built_in_codec("responses").reply_body(responses_searched("Sunny.", "weather")) or {}
    body = {**body, "output": [compaction, *body["output"]]}
    reply = parse_response("responses", body)
    assert reply.compaction is not None and reply.compaction.item == compaction
    assert reply.provider_items is not None
    assert [i["type"] for i in reply.provider_items.items] == ["web_search_call", "message"]
    sent = build_request("responses", [user_message("weather?"), reply], model="m")["input"]
    assert [i.get("type") for i in sent[1:4]] == ["compaction", "web_search_call", "message"]
