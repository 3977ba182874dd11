"""``tool_choice`` as a spec option: each API's shape (checked against the official SDKs'
request types), sent only with tools, binding the first call of a turn only."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import user_message
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import build_request
from durable_agent._wire.messages import ToolDefinition, ToolMessage
from durable_agent._wire.options import ModelOptions, NamedToolChoice
from durable_agent._wire.outgoing import options_for_call
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import running_worker, spec_for, start_session
from tests.support.sdk_types import validate_request

LOOKUP = ToolDefinition(
    name="lookup", description="Look a key up", parameters={"type": "object", "properties": {}}
)
EXPECTED: dict[str, dict[str, Any]] = {
    "chat": {
        "auto": "auto",
        "none": "none",
        "required": "required",
        "lookup": {"type": "function", "function": {"name": "lookup"}},
    },
    "responses": {
        "auto": "auto",
        "none": "none",
        "required": "required",
        "lookup": {"type": "function", "name": "lookup"},
    },
    "anthropic": {
        "auto": {"type": "auto"},
        "none": {"type": "none"},
        "required": {"type": "any"},
        "lookup": {"type": "tool", "name": "lookup"},
    },
}


def choice_of(value: str) -> Any:
    return NamedToolChoice(name=value) if value == "lookup" else value


@pytest.mark.parametrize("api", list(EXPECTED))
@pytest.mark.parametrize("value", ["auto", "none", "required", "lookup"])
def test_each_api_gets_its_own_shape(api: Any, value: str) -> None:
    options = ModelOptions(tool_choice=choice_of(value), max_output_tokens=100)
    body = build_request(api, [user_message("hi")], model="m", tools=[LOOKUP], options=options)
    assert body["tool_choice"] == EXPECTED[api][value]
    validate_request(api, body)
    without_tools = build_request(api, [user_message("hi")], model="m", options=options)
    assert "tool_choice" not in without_tools


def test_a_named_tool_must_be_one_of_the_specs_tools() -> None:
    provider: Any = type("P", (), {"base_url": "http://127.0.0.1:9/v1"})()
    spec = spec_for(provider, ["lookup"])
    data = spec.model_dump()
    data["model"]["options"]["tool_choice"] = {"name": "delete_everything"}
    with pytest.raises(pydantic.ValidationError, match=r"model.options.tool_choice: 'delete_"):
        type(spec).model_validate(data)


def test_required_binds_the_first_call_of_a_turn_only() -> None:
    options = ModelOptions(tool_choice="required")
    asked = [user_message("go")]
    ran = [*asked, ToolMessage(tool_call_id="c", content="done")]
    assert options_for_call(options, asked).tool_choice == "required"
    assert options_for_call(options, ran).tool_choice is None
    assert options_for_call(options, [*ran, user_message("again")]).tool_choice == "required"


registry = Registry()


@tool(registry=registry)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}: 42"


async def test_a_named_tool_choice_on_the_real_server_ends_after_the_tool_ran(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [assistant_calls(("lookup", {"key": "answer"})), assistant_text("It is 42.")]
    with ScriptedProvider(script) as provider:
        spec = spec_for(provider, ["lookup"])
        options = spec.model.options.model_copy(
            update={"tool_choice": NamedToolChoice(name="lookup")}
        )
        model = spec.model.model_copy(update={"options": options})
        spec = spec.model_copy(update={"model": model})
        async with running_worker(temporal_env, task_queue, registry) as client:
            handle = await start_session(client, task_queue, spec, "what is the answer?")
            result = await handle.result()
    first, second = (r.body for r in provider.requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert "tool_choice" not in second, "after the tool ran the model may answer"
    assert result.final is not None and result.final.content == "It is 42."
