"""Model rescue: an unusable model turn (broken tool-call JSON, an unknown tool, an empty
answer, an answer off its schema) is met by the spec's strategy, each step recorded as
a ``resque`` message; on the pure Session for every case, and on the real server for
every strategy."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.document import AgentInput
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import (
    AssistantMessage,
    FlushMessage,
    Message,
    ResqueMessage,
    ToolMessage,
    UserMessage,
)
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._in_process import InProcessRun
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.support.agent_harness import (
    query_messages,
    record_history,
    running_worker,
    spec_for,
    start_session,
)
from tests.support.histories import activity_results

registry = Registry()


@tool(registry=registry)
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: 55F rainy"


def calls(name: str, arguments: str) -> AssistantMessage:
    return AssistantMessage.model_validate(
        {
            "content": "",
            "tool_calls": [{"id": "call_0", "function": {"name": name, "arguments": arguments}}],
        }
    )


BROKEN_JSON = calls("get_weather", '{"city": "Oslo"')
UNKNOWN_TOOL = calls("launch_rockets", "{}")
EMPTY = assistant_text("  \n")  # (a wholly blank turn is a failed attempt, retried)
THOUGHT_ONLY = AssistantMessage(content="", reasoning="The user wants the weather...")
MALFORMED = AssistantMessage(content="", malformed_tool_calls=['<tool_call>{"name": get_weather'])
GOOD = assistant_text("Oslo: 55F rainy")


class _NoProvider:
    base_url = "http://127.0.0.1:9/v1"


async def drive(
    replies: list[AssistantMessage], *, message_ids: bool = False, **spec: Any
) -> tuple[Any, list[Message], list[Any]]:
    """The replies in order on the pure Session; the result, the array, the requests."""
    answers = iter(replies)
    provider: Any = _NoProvider()
    built = spec_for(provider, ["get_weather"], instructions="Be brief.", **spec)
    built = built.model_copy(update={"model": built.model.model_copy(update={"stream": False})})
    driver = InProcessRun(built, registry, lambda body: next(answers), message_ids=message_ids)
    result = await driver.run(AgentInput(spec=built, message="weather in Oslo?"))
    return result, list(driver.session.messages), driver.requests


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (BROKEN_JSON, "the arguments of its get_weather call are not valid JSON"),
        (UNKNOWN_TOOL, "it called a tool that does not exist: launch_rockets"),
        (EMPTY, "its answer was empty"),
        (THOUGHT_ONLY, "its answer was empty"),
        (MALFORMED, "tool-call blocks that could not be read as calls"),
    ],
)
async def test_correct_tells_the_model_what_was_wrong_and_asks_again(
    bad: AssistantMessage, why: str
) -> None:
    result, messages, requests = await drive([bad, GOOD])
    assert result.status == "done" and result.final.content == "Oslo: 55F rainy"
    [resque] = [m for m in messages if isinstance(m, ResqueMessage)]
    assert resque.strategy == "correct" and resque.attempt == 1 and resque.mode == "tool"
    assert resque.reason.startswith(why)
    # pairing holds: a result for every call of the unusable turn, before the rescue
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert len(results) == len(bad.tool_calls or []) and all(r.is_error for r in results)
    sent = requests[1]["messages"]
    assert sent[-1] == {"role": "user", "content": resque.content}
    assert why in sent[-1]["content"]


async def test_an_answer_off_its_schema_is_corrected() -> None:
    schema = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}
    result, messages, _ = await drive(
        [assistant_text('{"temp": "warm"}'), assistant_text('{"temp": 55}')], output_schema=schema
    )
    assert result.structured_output == {"temp": 55} and result.error is None
    [resque] = [m for m in messages if isinstance(m, ResqueMessage)]
    assert "does not match the output schema" in resque.reason


@pytest.mark.parametrize("ids", [False, True])
async def test_a_message_asked_again_is_a_message_of_its_own(ids: bool) -> None:
    """With ids, each message the loop adds has its own, the user's message asked again
    afresh too (not its original's); a session opened before ids adds none."""
    _, messages, _ = await drive(
        [UNKNOWN_TOOL, GOOD], message_ids=ids, rescue={"strategy": "flush"}
    )
    if ids:
        assert [m.id for m in messages] == [f"m{k}" for k in range(len(messages))]
    else:
        assert [m.id for m in messages] == [None] * len(messages)
    assert messages[6].content == messages[1].content  # (the message asked again)


async def test_flush_starts_afresh_from_the_latest_user_message() -> None:
    result, messages, requests = await drive([UNKNOWN_TOOL, GOOD], rescue={"strategy": "flush"})
    assert result.final.content == "Oslo: 55F rainy"
    roles = [m.role for m in messages]
    assert roles == ["system", "user", "assistant", "tool", "resque", "flush", "user", "assistant"]
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert results[0].content.startswith("Error calling 'launch_rockets': not run")
    again = messages[6]
    assert isinstance(again, UserMessage) and again.mode == "tool"
    assert again.content == "weather in Oslo?"
    assert requests[1]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather in Oslo?"},
    ]


async def test_fail_and_spent_attempts_end_the_turn() -> None:
    result, messages, requests = await drive([EMPTY], rescue={"strategy": "fail"})
    assert result.status == "failed" and result.stop_reason == "unusable_reply"
    assert result.error is not None
    assert result.error.startswith("the model's reply could not be used: its answer was empty.")
    assert "rescue.max_attempts" in result.error, "it says what to do next"
    assert len(requests) == 1 and isinstance(messages[-1], ResqueMessage)

    result, messages, requests = await drive(
        [BROKEN_JSON, EMPTY, GOOD], rescue={"strategy": "correct", "max_attempts": 1}
    )
    assert result.stop_reason == "unusable_reply" and len(requests) == 2
    rescues = [m for m in messages if isinstance(m, ResqueMessage)]
    assert [(r.strategy, r.attempt) for r in rescues] == [("correct", 1), ("fail", 2)]


def _model(script: dict[str, list[AssistantMessage]]) -> Any:
    """Answers each session (by its first user message) from its own script."""

    def answer(request: RecordedRequest) -> AssistantMessage:
        first = next(m for m in request.body["messages"] if m["role"] == "user")
        return script[first["content"]].pop(0)

    return answer


async def test_every_strategy_on_the_real_server(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = {
        "correct": [BROKEN_JSON, calls("get_weather", '{"city": "Oslo"}'), GOOD],
        "flush": [UNKNOWN_TOOL, GOOD],
        "fail": [EMPTY],
    }
    with ScriptedProvider(responder=_model(script)) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            handles = {}
            for strategy in script:
                spec = spec_for(provider, ["get_weather"], rescue={"strategy": strategy})
                handles[strategy] = await start_session(client, task_queue, spec, strategy)
            results = {s: await asyncio.wait_for(h.result(), 30) for s, h in handles.items()}
            arrays = {s: await query_messages(h) for s, h in handles.items()}
            await record_history(handles["correct"], "rescue")
            corrected = await handles["correct"].fetch_history()
    assert results["correct"].final.content == "Oslo: 55F rainy"
    assert [m.role for m in arrays["correct"]] == [
        "user",
        "assistant",
        "tool",
        "resque",
        "assistant",
        "tool",
        "assistant",
    ]
    broken = arrays["correct"][2]
    assert isinstance(broken, ToolMessage) and "not valid JSON" in broken.content
    # a reply of a few calls comes whole, unvouched for: the workflow parsed and rescued it
    replies = activity_results(corrected, "call_model")
    assert [("calls" in r, "arguments_checked" in r) for r in replies] == [(False, False)] * 3
    assert results["flush"].final.content == "Oslo: 55F rainy"
    assert isinstance(arrays["flush"][4], FlushMessage)
    assert results["fail"].status == "failed" and results["fail"].stop_reason == "unusable_reply"
    assert not script["correct"] and not script["flush"] and not script["fail"]
    # every message the loop wrote says when, and that a tool or the loop wrote it
    for array in arrays.values():
        assert all(m.timestamp is not None for m in array), array  # type: ignore[union-attr]
        assert all(m.mode == "tool" for m in array if isinstance(m, ToolMessage)), array


CUT = AssistantMessage(content="Oslo: 55F and", finish_reason="length")
REST = assistant_text("rainy.")


async def test_a_cut_answer_is_continued_failed_or_accepted_as_the_spec_says() -> None:
    result, messages, requests = await drive([CUT, REST])
    assert result.status == "done" and result.final.content == "rainy."
    [resque] = [m for m in messages if isinstance(m, ResqueMessage)]
    assert resque.strategy == "correct" and "finish_reason length" in resque.reason
    sent = requests[1]["messages"]
    assert sent[-2] == {"role": "assistant", "content": "Oslo: 55F and"}, "it reads its start"
    assert (
        sent[-1]["role"] == "user" and "Continue it exactly where it stopped" in sent[-1]["content"]
    )

    result, messages, requests = await drive([CUT], stop={"on_truncated": "fail"})
    assert result.status == "failed" and result.stop_reason == "truncated"
    assert "finish_reason length" in (result.error or "") and len(requests) == 1
    kept = messages[-1]
    assert isinstance(kept, AssistantMessage) and kept.content == CUT.content, "kept"

    result, _, _ = await drive([CUT], stop={"on_truncated": "accept"})
    assert result.status == "done" and result.final.content == CUT.content
    assert result.final.finish_reason == "length"

    result, _, requests = await drive([CUT, CUT], rescue={"max_attempts": 1})
    assert result.stop_reason == "truncated" and len(requests) == 2, "attempts are counted"


async def test_a_cut_answer_on_the_real_server_is_continued_and_shown_in_status(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([CUT, REST]) as provider:
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec_for(provider, session={}), "weather in Oslo?")
            reply = await agents.session(session).wait(after=1, timeout=30)
            status = await agents.session(session).status()
            messages = await agents.session(session).messages()
            await agents.session(session).end()
            await agents.session(session).result()
            await record_history(client.get_workflow_handle(session), "truncated_answer")
    assert reply.reply is not None and reply.reply.content == "rainy."
    assert status.finish_reason == "stop"
    assert [m.role for m in messages] == ["user", "assistant", "resque", "assistant"]
    assert messages[1].finish_reason == "length"  # type: ignore[union-attr]
    assert "Continue it exactly" in provider.bodies()[1]["messages"][-1]["content"]
