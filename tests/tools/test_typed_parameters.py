"""Tools typed as users write them: a parameter declared as a pydantic model (or a
dataclass) reaches the function as one; an optional field goes to the model, under
``strict``, as the OpenAI SDK itself writes it (one ``anyOf`` with ``null``), and a
``null`` for a parameter with a default that takes none means that default."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel, create_model
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, Registry, tool
from durable_agent._wire.codecs import wire_parameters
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import running_worker, spec_for


class Address(BaseModel):
    street: str
    unit: str | None = None


@dataclass
class Window:
    start: str
    end: str


received: list[tuple[object, ...]] = []


@tool(strict=True)
def ship(to: Address, window: Window, note: str | None = None, limit: int = 10) -> str:
    """Ship an order."""
    received.append((to, window, note, limit))
    return f"to {to.street} between {window.start} and {window.end}, limit {limit}"


def test_an_optional_field_is_one_anyof_with_null_as_the_openai_sdk_writes_it() -> None:
    wire = wire_parameters(ship.definition)
    note = wire["properties"]["note"]
    assert note == {"anyOf": [{"type": "string"}, {"type": "null"}]}, note
    unit = wire["$defs"]["Address"]["properties"]["unit"]
    # the SDK's own strict projection of the same model
    sdk = to_strict_json_schema(create_model("M", to=(Address, ...)))
    expected = {k: v for k, v in sdk["$defs"]["Address"]["properties"]["unit"].items()}
    expected.pop("title", None)
    unit.pop("title", None)
    assert unit == expected, (unit, expected)
    assert "default" not in json.dumps(note)
    assert set(wire["required"]) == {"to", "window", "note", "limit"}
    assert wire["additionalProperties"] is False


async def test_model_and_dataclass_parameters_arrive_as_instances(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    received.clear()
    arguments = {
        "to": {"street": "Main St 1", "unit": None},
        "window": {"start": "9:00", "end": "12:00"},
        "note": None,
        "limit": None,  # strict mode's way of leaving it out
    }
    script = [assistant_calls(("ship", arguments)), assistant_text("shipped")]
    with ScriptedProvider(script) as provider:
        async with running_worker(temporal_env, task_queue, Registry([ship])):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            sid = await agents.start(spec_for(provider, ["ship"]), "ship it")
            await asyncio.wait_for(agents.session(sid).result(), 60)
    [(to, window, note, limit)] = received
    assert isinstance(to, Address) and to.street == "Main St 1"
    assert isinstance(window, Window) and window.end == "12:00"
    assert note is None and limit == 10, "null took the default"
    result = next(m for m in provider.requests[1].body["messages"] if m["role"] == "tool")
    assert result["content"] == "to Main St 1 between 9:00 and 12:00, limit 10"
