"""The benchmark's model and tools: deterministic, zero latency, over real HTTP.

The model is picked by name: ``bench-a`` makes 10 rounds of 4 parallel tool calls,
``bench-b`` makes 199 rounds of one call that returns 1 KB (200 model calls).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, ToolCall, ToolDefinition
from durable_agent.testing import assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest

registry = Registry()


@tool(registry=registry)
def lookup(key: int) -> str:
    """Look a key up."""
    return f"value {key}"


@tool(registry=registry)
def read_kb(key: int) -> str:
    """Read one kilobyte."""
    return (f"record {key} " * 100)[:1024]


@dataclass(frozen=True)
class Workload:
    model: str
    tool: str
    rounds: int
    calls_per_round: int

    @property
    def model_calls(self) -> int:
        return self.rounds + 1


A = Workload("bench-a", "lookup", rounds=10, calls_per_round=4)
B = Workload("bench-b", "read_kb", rounds=199, calls_per_round=1)
C = Workload("bench-c", "lookup", rounds=2, calls_per_round=2)
"""Short sessions, for many of them at once (``./run bench-fleet``)."""
WORKLOADS = {w.model: w for w in (A, B, C)}


def tool_definitions(workload: Workload) -> list[ToolDefinition]:
    found = registry.get(workload.tool)
    assert found is not None
    return [found.definition]


def bench_model(request: RecordedRequest) -> AssistantMessage:
    workload = WORKLOADS[request.body["model"]]
    done = sum(1 for m in request.body["messages"] if m["role"] == "assistant")
    if done >= workload.rounds:
        return assistant_text(f"finished {done} rounds")
    first = done * workload.calls_per_round
    return assistant_calls(  # ids unique in the session, as a real model's (a peer checks)
        *[
            ToolCall.model_validate(
                {
                    "id": f"call_{first + k}",
                    "function": {
                        "name": workload.tool,
                        "arguments": json.dumps({"key": first + k}),
                    },
                }
            )
            for k in range(workload.calls_per_round)
        ]
    )
