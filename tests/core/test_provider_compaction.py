"""The providers' own compaction on the wire: what each request asks for, the item or
block a reply brings kept verbatim on the assistant message and sent back in place of
what it replaced, and only ever to the endpoint that made it. Pure: the codecs, the
request builder and the Session's own rules, in this process."""

from __future__ import annotations

import json
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.document import AgentInput, AgentSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import (
    BUILT_IN_CODECS,
    ask_compaction_of,
    build_request,
    compaction_headers,
    parse_response,
    reply_body_of,
    stream_to_message,
)
from durable_agent._wire.context import ContextRules, compaction_until
from durable_agent._wire.messages import (
    AssistantMessage,
    CompactionPart,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    parse_messages,
)
from durable_agent._wire.options import ClearToolUses, ProviderCompaction
from durable_agent._wire.outgoing import compaction_window
from durable_agent.capabilities import Capabilities
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._in_process import InProcessRun
from durable_agent.testing._scripted_provider import RecordedRequest
from durable_agent.testing._server_compaction import CLEARED, ServerCompaction
from tests.support.agent_harness import record_history, running_worker

HERE = "http://127.0.0.1:9/v1"
ELSEWHERE = "http://127.0.0.1:10/v1"
SETTINGS = ProviderCompaction(strategy="provider", threshold_tokens=1_000)
ITEM = {"type": "compaction", "id": "cmp_7", "encrypted_content": "gAAAA-opaque-7"}
BLOCK = {"type": "compaction", "content": "The user asked about order 7."}


def _conversation(part: CompactionPart) -> list[Message]:
    return [
        SystemMessage(content="Be brief."),
        UserMessage(content="a long first question " * 50),
        AssistantMessage(content="first answer", compaction=part),
        UserMessage(content="second question"),
    ]


def test_a_responses_request_asks_for_compaction_past_the_owners_threshold() -> None:
    body = build_request("responses", [UserMessage(content="hi")], model="m")
    ask_compaction_of(BUILT_IN_CODECS["responses"], body, SETTINGS)
    assert body["context_management"] == [{"type": "compaction", "compact_threshold": 1_000}]
    assert compaction_headers("responses", SETTINGS) == {}
    chat = build_request("chat", [UserMessage(content="hi")], model="m")
    ask_compaction_of(BUILT_IN_CODECS["chat"], chat, SETTINGS)
    assert "context_management" not in chat  # Chat Completions has none: own compaction


def test_an_anthropic_request_sends_the_owners_edits_in_order_with_their_betas() -> None:
    settings = ProviderCompaction(
        strategy="both",
        threshold_tokens=60_000,
        keep_thinking_turns=2,
        clear_tool_uses=ClearToolUses(trigger_tokens=30_000, keep=4, clear_at_least_tokens=5_000),
    )
    body = build_request("anthropic", [UserMessage(content="hi")], model="m")
    ask_compaction_of(BUILT_IN_CODECS["anthropic"], body, settings)
    assert body["context_management"] == {
        "edits": [
            {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 2}},
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": 30_000},
                "keep": {"type": "tool_uses", "value": 4},
                "clear_at_least": {"type": "input_tokens", "value": 5_000},
            },
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 60_000}},
        ]
    }
    assert compaction_headers("anthropic", settings) == {
        "anthropic-beta": "context-management-2025-06-27,compact-2026-01-12"
    }
    own = settings.model_copy(update={"strategy": "own"})
    assert compaction_headers("anthropic", own) == {}


def test_a_responses_compaction_item_is_kept_verbatim_and_sent_in_place_of_what_it_replaced() -> (
    None
):
    reply = {
        "status": "completed",
        "output": [
            ITEM,
            {"type": "message", "content": [{"type": "output_text", "text": "first answer"}]},
        ],
        "usage": {"input_tokens": 1200, "output_tokens": 10},
    }
    parsed = parse_response("responses", reply)
    assert parsed.compaction is not None and parsed.compaction.item == ITEM
    part = parsed.compaction.model_copy(update={"endpoint": HERE})
    dumped = json.dumps([m.model_dump(mode="json") for m in _conversation(part)])
    stored = parse_messages(json.loads(dumped))  # as the array is stored and read back
    body = build_request("responses", compaction_window(stored, "responses", HERE), model="m")
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        ITEM,
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "second question"},
    ]


def test_an_anthropic_compaction_block_and_applied_edits_are_kept_and_the_block_resent_first() -> (
    None
):
    reply = {
        "type": "message",
        "role": "assistant",
        "content": [BLOCK, {"type": "text", "text": "first answer"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 900, "output_tokens": 10},
        "context_management": {
            "applied_edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "cleared_tool_uses": 3,
                    "cleared_input_tokens": 4_200,
                }
            ]
        },
    }
    parsed = parse_response("anthropic", reply)
    assert parsed.compaction is not None and parsed.compaction.item == BLOCK
    assert parsed.usage is not None
    assert (parsed.usage.cleared_tool_uses, parsed.usage.cleared_input_tokens) == (3, 4_200)
    part = parsed.compaction.model_copy(update={"endpoint": HERE})
    body = build_request(
        "anthropic", compaction_window(_conversation(part), "anthropic", HERE), model="m"
    )
    # the user turn before the block opens the request (the server drops it); the
    # block goes first in its turn, verbatim
    assert [t["role"] for t in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [BLOCK, {"type": "text", "text": "first answer"}]


def test_a_streamed_anthropic_reply_keeps_its_block_and_its_applied_edits() -> None:
    def delta(piece: str) -> dict[str, Any]:
        return {"type": "compaction_delta", "content": piece}

    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 900}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "compaction"}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": delta(piece)}
            for piece in ("The user ", "asked.")
        ),
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ok"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3},
            "context_management": {
                "applied_edits": [
                    {
                        "type": "clear_tool_uses_20250919",
                        "cleared_tool_uses": 2,
                        "cleared_input_tokens": 700,
                    }
                ]
            },
        },
        {"type": "message_stop"},
    ]
    chunks = [f"data: {json.dumps(e)}\n\n".encode() for e in events]
    message = stream_to_message("anthropic", chunks)
    assert message.content == "ok"
    assert message.compaction is not None
    assert message.compaction.item == {"type": "compaction", "content": "The user asked."}
    assert message.usage is not None and message.usage.cleared_input_tokens == 700


def test_no_other_endpoint_is_sent_the_item_and_it_gets_the_whole_window() -> None:
    part = CompactionPart(api="responses", endpoint=HERE, item=ITEM)
    conversation = _conversation(part)
    for api, endpoint in (("responses", ELSEWHERE), ("chat", HERE), ("anthropic", HERE)):
        body = build_request(api, compaction_window(conversation, api, endpoint), model="m")
        sent = json.dumps(body)
        assert "gAAAA-opaque-7" not in sent and "compaction" not in sent, api
        assert "a long first question" in sent, api  # nothing before it is left out
    block = CompactionPart(api="anthropic", endpoint=HERE, item=BLOCK)
    window = compaction_window(_conversation(block), "responses", HERE)
    body = build_request("responses", window, model="m")
    assert "The user asked about order 7" not in json.dumps(body)


def test_another_account_at_the_same_address_is_not_sent_the_item() -> None:
    """Two keys (or two sets of headers) at one address are two accounts: the item one
    made is sent with its own key and never with the other's."""
    team_a = ProviderEndpoint(api="responses", base_url=HERE, api_key_env="TEAM_A_KEY")
    team_b = ProviderEndpoint(api="responses", base_url=HERE, api_key_env="TEAM_B_KEY")
    project = team_a.model_copy(update={"headers": {"OpenAI-Project": "proj_2"}})
    part = CompactionPart(api="responses", endpoint=team_a.account, item=ITEM)
    own = compaction_window(_conversation(part), "responses", team_a.account)
    assert "gAAAA-opaque-7" in json.dumps(build_request("responses", own, model="m"))
    for other in (team_b, project):
        window = compaction_window(_conversation(part), "responses", other.account)
        sent = json.dumps(build_request("responses", window, model="m"))
        assert "gAAAA-opaque-7" not in sent and "a long first question" in sent
    assert "TEAM_A_KEY" not in team_a.account, "the mark names no variable, only a digest"


def test_an_own_summary_after_the_item_keeps_standing_for_what_it_covers() -> None:
    part = CompactionPart(api="responses", endpoint=HERE, item=ITEM)
    array: list[Message] = [
        *_conversation(part),
        AssistantMessage(content="second answer"),
        UserMessage(content="third question"),
        SystemMessage(content="[Summary] before the third", source="compaction", compacts=5),
        AssistantMessage(content="third answer"),
    ]
    window = compaction_window(array, "responses", HERE)
    # the cut left out the one message before the item: the summary counts from it
    summary = next(m for m in window if isinstance(m, SystemMessage) and m.compacts)
    assert summary.compacts == 4
    assert window[4] == UserMessage(content="third question")
    body = build_request("responses", window, model="m")
    assert "gAAAA-opaque-7" not in json.dumps(body)  # the later own cut wins
    assert body["input"][-1] == {"role": "assistant", "content": "third answer"}


def test_the_sessions_own_compaction_counts_from_the_providers_item() -> None:
    rules = ContextRules(budget_tokens=200, when_over="compact")
    long = [UserMessage(content="x" * 4_000), AssistantMessage(content="ok")]
    asked = [*long, UserMessage(content="next")]
    assert compaction_until(asked, rules) == 2
    part = CompactionPart(api="responses", endpoint=HERE, item=ITEM)
    compacted = [long[0], AssistantMessage(content="ok", compaction=part), asked[-1]]
    assert compaction_until(compacted, rules) is None


@tool
def lookup(turn: int) -> str:
    """A record."""
    return f"record {turn}: " + "shipped with DHL. " * 40


def _session(api: str, strategy: str, server: ServerCompaction, **run: Any) -> InProcessRun:
    endpoint = ProviderEndpoint(
        api=api,
        base_url=HERE,
        api_key_env=None,
        compaction=ProviderCompaction.model_validate(
            {
                "strategy": strategy,
                "threshold_tokens": 1_000,
                "clear_tool_uses": (
                    {"trigger_tokens": 500, "keep": 1} if api == "anthropic" else None
                ),
            }
        ),
    )
    spec = AgentSpec.model_validate(
        {
            "model": {"name": "m", "endpoint": "owned", "stream": False},
            "instructions": "Look records up.",
            "tools": ["lookup"],
        }
    )

    def model(body: dict[str, Any]) -> AssistantMessage:
        last = json.dumps((body.get("input") or body.get("messages"))[-1])
        answer = (
            assistant_text("done")
            if "function_call_output" in last or "tool_result" in last
            else assistant_calls(("lookup", {"turn": len(run_.requests)}))
        )
        reply = server.reply(answer, server.serve(body))
        codec = BUILT_IN_CODECS[api]
        return codec.parse_response(reply_body_of(codec, reply) or {})  # through the wire

    asked = [1]

    def next_question(r: InProcessRun) -> None:
        last = r.session.messages[-1]
        if isinstance(last, AssistantMessage) and not last.tool_calls and asked[0] < 12:
            r.send(f"question {asked[0]}: " + "where is it? " * 20)
            asked[0] += 1

    run_ = InProcessRun(
        spec=spec,
        registry=Registry([lookup]),
        model=model,
        between_commands=next_question,
        capabilities=Capabilities(models={"owned": endpoint}),
        **run,
    )
    return run_


async def test_a_session_resends_the_latest_item_after_continue_as_new() -> None:
    server = ServerCompaction("responses")
    run = _session("responses", "provider", server, continue_as_new_every=3)
    await run.run(AgentInput(spec=run.spec, message="question 0: where is it?"))
    assert run.runs > 2 and server.made >= 2
    kept = [m for m in run.session.messages if isinstance(m, AssistantMessage) and m.compaction]
    assert kept and all(m.compaction and m.compaction.endpoint == HERE for m in kept)
    latest = kept[-1].compaction
    assert latest is not None
    after = [b for b in run.requests if latest.item in b["input"]]
    assert after, "no request after the latest compaction carried it"
    # each such request starts with it: what it replaced is not sent again
    assert all(b["input"][0] == latest.item for b in after)


async def test_anthropic_clears_tool_results_and_the_usage_counts_it() -> None:
    server = ServerCompaction("anthropic")
    run = _session("anthropic", "provider", server)
    await run.run(AgentInput(spec=run.spec, message="question 0: where is it?"))
    cleared = [
        m.usage.cleared_input_tokens
        for m in run.session.messages
        if isinstance(m, AssistantMessage) and m.usage and m.usage.cleared_input_tokens
    ]
    assert cleared and all(c > 0 for c in cleared)
    assert all("context_management" in b for b in run.requests if b.get("tools"))
    # the array keeps every result whole: clearing is the server's, never the store's
    results = [m for m in run.session.messages if isinstance(m, ToolMessage)]
    assert results and all(CLEARED not in m.content for m in results)


async def test_with_the_projects_own_strategy_nothing_is_asked_of_the_provider() -> None:
    server = ServerCompaction("responses")
    run = _session("responses", "own", server)
    await run.run(AgentInput(spec=run.spec, message="question 0: where is it?"))
    assert run.requests and all("context_management" not in b for b in run.requests)
    assert server.made == 0


async def test_a_worker_session_on_anthropic_compacts_on_the_server_across_runs(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """Through a real worker and Temporal: an Anthropic endpoint whose owner chose
    ``both``; the server's block is kept, the next requests start with the user turn
    before it and carry it first, the session continues as new, and its history is kept
    for the replay suite (``provider_compaction``)."""
    server = ServerCompaction("anthropic")

    def model(request: RecordedRequest) -> AssistantMessage:
        return server.reply(assistant_text("noted"), server.serve(request.body))

    with ScriptedProvider(responder=model) as provider:
        endpoint = ProviderEndpoint(
            api="anthropic",
            base_url=provider.base_url,
            api_key_env=None,
            compaction=ProviderCompaction(strategy="both", threshold_tokens=1_000),
        )
        spec = AgentSpec.model_validate(
            {
                "model": {
                    "name": "claude",
                    "endpoint": "managed",
                    "stream": True,
                    "context": {"budget_tokens": 20_000, "when_over": "compact"},
                },
                "instructions": "Be brief.",
                "session": {"continue_as_new_after_events": 20},
            }
        )
        owner = Capabilities(models={"managed": endpoint})
        worker = running_worker(temporal_env, task_queue, Registry(), capabilities=owner)
        async with worker as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(await agents.start(spec, "first: " + "tell me more. " * 400))
            await session.wait(timeout=60)
            for turn in range(1, 5):
                after = (await session.status()).message_count
                await session.send(f"question {turn}")
                await session.wait(after=after, timeout=60)
            messages = await session.messages()
            handle = client.get_workflow_handle(session.id)
            info = (await handle.describe()).raw_description.workflow_execution_info
            await session.end()
            await record_history(handle, "provider_compaction")
    assert info.execution.run_id != info.first_run_id  # it continued as new
    assert server.made == 1
    kept = [m for m in messages if isinstance(m, AssistantMessage) and m.compaction]
    assert len(kept) == 1 and kept[0].compaction is not None
    block = kept[0].compaction.item
    assert kept[0].compaction.endpoint == provider.base_url
    headers = {k.lower(): v for k, v in provider.requests[0].headers.items()}
    assert headers["anthropic-beta"] == "compact-2026-01-12"
    for request in provider.requests[1:]:
        turns = request.body["messages"]
        assert turns[0]["content"][0]["text"].startswith("first: ")  # the server drops it
        assert turns[1]["content"][0] == block  # verbatim, first in its turn
