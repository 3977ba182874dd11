"""A session on the Responses API end to end: the provider client streams its events
over HTTP, the workflow runs the tool the final response calls, and the next request
carries the call and its output paired by ``call_id``, as OpenAI's API reads them."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.events import LiveEvent
from durable_agent._spec.document import AgentSpec, ModelSpec
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider
from durable_agent.testing._scripted_provider import sse_reply
from tests.support.agent_harness import running_worker

registry = Registry()


@tool(registry=registry)
def get_time(city: str) -> str:
    """The time in a city."""
    return f"09:30 in {city}"


def streamed(text: str, output: list[dict[str, Any]]) -> Any:
    """The events the Responses API streams: text deltas, then the whole response."""
    pieces = [text[k : k + 5] for k in range(0, len(text), 5)]
    deltas = [{"type": "response.output_text.delta", "delta": piece} for piece in pieces]
    done = {
        "type": "response.completed",
        "response": {
            "id": "resp_1",
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": 12, "output_tokens": 7},
        },
    }
    return sse_reply([*deltas, done], done=False)


CALL = {
    "type": "function_call",
    "call_id": "call_abc",
    "name": "get_time",
    "arguments": '{"city": "Oslo"}',
}
ANSWER = {
    "type": "message",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "It is 09:30 in Oslo."}],
}


async def test_a_streamed_responses_session_runs_a_tool_and_pairs_its_output(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    # the answer's stream stops after two pieces until a reader has shown one of them
    shown = threading.Event()
    answer = streamed("It is 09:30 in Oslo.", [ANSWER])
    script = [streamed("", [CALL]), dataclasses.replace(answer, hold=shown, hold_after=2)]
    with ScriptedProvider(script) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api="responses", api_key_env=None)
        spec = AgentSpec(
            model=ModelSpec(name="scripted", endpoint=endpoint),
            tools=["get_time"],
            session={"end_after_reply": True},
        )
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            sid = await agents.start(spec, "What time is it in Oslo?")
            events: list[LiveEvent] = []
            async for event in agents.session(sid).follow():
                events.append(event)
                if event.type == "text_delta":
                    shown.set()
            result = await agents.session(sid).result()
            messages = await agents.session(sid).messages()
    assert result.status == "done" and result.final is not None
    assert result.final.content == "It is 09:30 in Oslo."
    first, second = provider.requests
    assert first.path.endswith("/responses") and first.body["stream"] is True
    assert [t["name"] for t in first.body["tools"]] == ["get_time"]
    items = second.body["input"]
    call = next(i for i in items if i.get("type") == "function_call")
    output = next(i for i in items if i.get("type") == "function_call_output")
    assert call["call_id"] == output["call_id"] == "call_abc"
    assert output["output"] == "09:30 in Oslo"
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].content == "09:30 in Oslo"
    shown = "".join(e.text for e in events if e.type == "text_delta")
    assert shown == "It is 09:30 in Oslo.", "the deltas, in the order they came"
