"""Every TurnConformance.run vector, twice: through the pure Session (in-process, no
server, milliseconds) and through the real AgentWorkflow on the dev server.

The vector's tools become schema tools whose results come from the vector. On the
workflow, its scripted model responses are served over HTTP by the scripted provider;
on the Session, the same responses are parsed by the same codecs from the request
bodies the same codecs built. Waivers: turn_waivers.py; vectors for behaviour that
does not exist yet are reported as skipped, with the reason.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.boundary import AgentResult, CancelTurnSignal
from durable_agent._contracts.events import LiveEvent
from durable_agent._session.protocol import CancelRequested
from durable_agent._spec.document import AgentInput, AgentSpec
from durable_agent._spec.tools import ToolContext, ToolPolicy
from durable_agent._tools.functions import schema_tool
from durable_agent._tools.hooks import guardrail
from durable_agent._tools.registry import Registry
from durable_agent._wire.codecs import parse_response
from durable_agent._wire.context import SUMMARY_PREFIX, ContextRules
from durable_agent._wire.messages import AssistantMessage, Message, ToolMessage, UserMessage
from durable_agent.testing import ScriptedProvider
from durable_agent.testing._in_process import InProcessRun
from durable_agent.testing._scripted_provider import json_reply
from tests.conformance.adapter import load_vectors, to_message, to_tool
from tests.conformance.their_events import matches, their_events
from tests.conformance.turn_waivers import FIELD_WAIVERS, NOT_RUN, UNCHECKED_FIELDS
from tests.support.agent_harness import query_messages, running_worker, spec_for

VECTORS = load_vectors("TurnConformance", ("run",))
#: The vectors' exception names for turns that ended without an answer, by stop_reason.
THEIR_ERRORS = {"cancelled": "CancelledError", "guardrail": "GuardrailError"}
CHECKED = {
    "result",
    "iterations",
    "total_messages",
    "message_sequence",
    "tool_result_message",
    "assistant_tool_calls_message",
    "denied_tools",
    "tool_execution_order",
    "error",
    "error_type",
    "trimmed_messages",
    "summary_contains",
    "tools_executed",
    "events",
}


def test_all_28_vectors_are_accounted_for() -> None:
    assert len(VECTORS) == 28
    for vector in VECTORS:
        fields = set(vector["expected"]) - UNCHECKED_FIELDS - CHECKED - {"error_reason"}
        assert vector["name"] in NOT_RUN or not fields, f"{vector['name']}: unchecked {fields}"


def their_shape(message: Message) -> dict[str, Any]:
    """Our message in the vectors' message_sequence shape."""
    if isinstance(message, AssistantMessage):
        shaped: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            shaped["metadata"] = {
                "tool_calls": [c.model_dump(mode="json") for c in message.tool_calls]
            }
        return shaped
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "content": message.content,
            "metadata": {"tool_call_id": message.tool_call_id},
        }
    return {"role": message.role, "content": message.content}


def their_count(messages: list[Message]) -> int:
    """The vectors' total_messages: one more than the array once a tool turn happened."""
    return len(messages) + (1 if any(isinstance(m, ToolMessage) for m in messages) else 0)


def test_the_counting_rule_matches_the_vectors_own_sequences() -> None:
    # Derived from, and checked against, every vector that lists both.
    checked = 0
    for vector in VECTORS:
        expected = vector["expected"]
        if "message_sequence" in expected and "total_messages" in expected:
            listed = expected["message_sequence"]
            tools = any(m["role"] == "tool" for m in listed)
            assert expected["total_messages"] == len(listed) + tools, vector["name"]
            checked += 1
    assert checked >= 4


class VectorRun:
    """A vector's tools, spec and scripted model, run on the real workflow."""

    def __init__(self, vector: dict[str, Any], env: WorkflowEnvironment | None = None) -> None:
        self.vector = vector
        self.env = env
        self.inputs = vector["input"]
        self.executed: list[tuple[int, int, str, dict[str, Any]]] = []
        self.session_id = f"vector-{vector['name']}-{uuid.uuid4().hex[:6]}"
        self.events: list[LiveEvent] = []
        self.results = {
            r["tool_call_id"]: r["result"]
            for turn in vector["sequence"]
            for r in turn.get("tool_results", [])
        }

    def registry(self) -> Registry:
        registry = Registry()
        for kind, rule in (self.inputs.get("guardrails") or {}).items():
            if kind in ("input", "output"):
                verdict = rule.get("reason") or "denied" if rule["action"] == "deny" else None
                guardrail(lambda text, v=verdict: v, name=f"vector_{kind}", registry=registry)
        denied = set((self.inputs.get("guardrails") or {}).get("tool", {}).get("deny_tools", []))
        for raw in self.inputs["tools"]:
            behaviour = self.inputs["tool_functions"].get(raw["name"], "")
            registry.add(
                schema_tool(
                    definition=to_tool(raw),
                    handler=self._handler(raw["name"], behaviour),
                    policy=ToolPolicy(
                        max_attempts=1, approval="deny" if raw["name"] in denied else "never"
                    ),
                    bind={p: b["input"] for p, b in (raw.get("bindings") or {}).items()},
                )
            )
        return registry

    def _handler(self, name: str, behaviour: str) -> Any:
        async def handler(arguments: dict[str, Any], ctx: ToolContext) -> str:
            self.executed.append((ctx.turn, ctx.slot, name, arguments))
            await self._steer(ctx.turn)
            if self.cancel_at in ("before_iteration_2", "after_tool_0") and len(self.executed) == 1:
                await self.cancel()  # while the first call runs: honoured at the next checkpoint
            result = self.results[ctx.tool_call_id]
            if behaviour.startswith("raises"):
                kind, message = re.fullmatch(r"Error calling '.+': (\w+): (.*)", result).groups()  # type: ignore[union-attr]
                raise {"RuntimeError": RuntimeError}[kind](message)
            return result

        return handler

    async def _steer(self, turn: int) -> None:
        steering = (self.inputs.get("steering") or {}).get("messages", [])
        for item in steering:  # queued while turn `turn` is in flight
            if item["inject_before_iteration"] == turn + 1:
                await self.send(item["text"])

    async def send(self, text: str) -> None:
        assert self.env is not None
        handle = self.env.client.get_workflow_handle(self.session_id)
        await handle.signal("send_message", UserMessage(content=text))

    @property
    def cancel_at(self) -> str | None:
        return (self.inputs.get("cancel") or {}).get("cancelled_at")

    async def cancel(self) -> None:
        assert self.env is not None
        handle = self.env.client.get_workflow_handle(self.session_id)
        await handle.signal("cancel_turn", CancelTurnSignal(by="vector"))

    def spec(self, provider: ScriptedProvider) -> AgentSpec:
        denied = (self.inputs.get("guardrails") or {}).get("tool", {})
        tools = [
            {
                "name": t["name"],
                **(
                    {"deny_reason": denied["reason"]}
                    if t["name"] in denied.get("deny_tools", [])
                    else {}
                ),
            }
            for t in self.inputs["tools"]
        ]
        guards = self.inputs.get("guardrails") or {}
        spec = spec_for(
            provider,
            tools,
            context=self.inputs.get("parent_inputs") or {},
            stop={"max_turns": 10},
            guardrails={k: [f"vector_{k}"] for k in ("input", "output") if k in guards},
            # Prompty checks for cancellation between one tool call and the next
            tool_execution="sequential" if self.cancel_at == "after_tool_0" else "parallel",
        )
        model: dict[str, Any] = {"stream": False}
        if "context_budget" in self.inputs:  # the vectors count characters, and summarise
            model["context"] = ContextRules(
                budget_tokens=self.inputs["context_budget"], chars_per_token=1, when_over="compact"
            )
        return spec.model_copy(update={"model": spec.model.model_copy(update=model)})

    def responses(self) -> list[dict[str, Any]]:
        """The model's responses, in order, as the provider sends them. With a context
        budget the first request asks for a summary: the model writes the one the vector
        shows (what is checked is where it goes and what it replaces)."""
        script = [turn["llm_response"] for turn in self.vector["sequence"]]
        summary = next(
            (
                m["content"].removeprefix(SUMMARY_PREFIX)
                for m in self.vector["expected"].get("trimmed_messages") or []
                if m["content"].startswith(SUMMARY_PREFIX)
            ),
            None,
        )
        if summary is not None:
            script.insert(
                0, {"choices": [{"message": {"content": summary}, "finish_reason": "stop"}]}
            )
        if self.vector["name"] == "tool_not_registered_error":
            answer = {"message": {"content": "I cannot do that."}, "finish_reason": "stop"}
            script.append({"choices": [answer]})
        return script

    def start_input(self, spec: AgentSpec) -> AgentInput:
        return AgentInput(spec=spec, history=[to_message(m) for m in self.inputs["messages"]])

    async def run(self) -> tuple[AgentResult, list[Message], list[dict[str, Any]]]:
        script = [json_reply(response) for response in self.responses()]
        task_queue = f"tq-{uuid.uuid4().hex[:8]}"
        assert self.env is not None
        with ScriptedProvider(script) as provider:
            async with running_worker(self.env, task_queue, self.registry()) as client:
                cancelled_first = self.cancel_at == "before_iteration"
                handle = await client.start_workflow(
                    "AgentWorkflow",
                    self.start_input(self.spec(provider)),
                    id=self.session_id,
                    task_queue=task_queue,
                    result_type=AgentResult,
                    # signal-with-start: the cancel is there before the first model call
                    start_signal="cancel_turn" if cancelled_first else None,
                    start_signal_args=[CancelTurnSignal(by="vector")] if cancelled_first else [],
                )
                result = await asyncio.wait_for(handle.result(), 60)
                messages = await query_messages(handle)
                reader = AgentClient(client, task_queue=task_queue)
                self.events = [e async for e in reader.session(self.session_id).follow()]
        return result, messages, [r.body for r in provider.requests]


class _NoProvider:
    base_url = "http://127.0.0.1:9/v1"


NO_PROVIDER: Any = _NoProvider()


class SessionVectorRun(VectorRun):
    """The same vector on the pure Session: no server, no HTTP."""

    async def run(self) -> tuple[AgentResult, list[Message], list[dict[str, Any]]]:
        responses = iter(self.responses())

        def model(body: dict[str, Any]) -> AssistantMessage:
            return parse_response("chat", next(responses))

        spec = self.spec(NO_PROVIDER)  # the endpoint is never called here

        def cancel_first(driver: InProcessRun) -> None:
            if driver.session.view.loop.phase == "starting":
                driver.session.handle(CancelRequested(CancelTurnSignal(by="vector")), driver.clock)

        self.driver = InProcessRun(
            spec,
            self.registry(),
            model,
            session_id=self.session_id,
            between_commands=cancel_first if self.cancel_at == "before_iteration" else None,
        )
        result = await self.driver.run(self.start_input(spec))
        self.executed = self.driver.executed
        return result, list(self.driver.session.messages), self.driver.requests

    async def send(self, text: str) -> None:
        self.driver.send(text)

    async def cancel(self) -> None:
        cancel = CancelRequested(CancelTurnSignal(by="vector"))
        self.driver.session.handle(cancel, self.driver.clock)


def check(name: str, field: str, expected: Any, actual: Any) -> None:
    if (name, field) in FIELD_WAIVERS:
        return
    assert actual == expected, f"{name}.{field}: expected {expected!r}, got {actual!r}"


#: The cases whose timing the test cannot fix: their cancel is sent from inside the
#: first tool, racing that tool's completion to the workflow. When the signal is taken
#: first, the running call is cancelled (as documented) and its result is lost, so the
#: vector's "between tools" (or "between iterations") does not hold. Seen once in six
#: loaded runs, and once for the second in a run of the suite; each reruns once.
RACES_ITS_OWN_CANCEL = {
    ("cancellation_between_tools", "workflow"),
    ("cancellation_between_iterations", "workflow"),
}


def _cases() -> list[Any]:
    return [
        pytest.param(
            vector,
            where,
            id=f"{vector['name']}-{where}",
            marks=[pytest.mark.flaky(reruns=1)]
            if (vector["name"], where) in RACES_ITS_OWN_CANCEL
            else [],
        )
        for vector in VECTORS
        for where in ("session", "workflow")
    ]


@pytest.mark.parametrize(("vector", "where"), _cases())
async def test_turn_vector(
    vector: dict[str, Any], where: str, temporal_env: WorkflowEnvironment
) -> None:
    name, expected = vector["name"], vector["expected"]
    if name in NOT_RUN:
        pytest.skip(NOT_RUN[name])
    if where == "session":
        run: VectorRun = SessionVectorRun(vector)
    else:
        run = VectorRun(vector, temporal_env)
    result, messages, requests = await run.run()
    final_text = result.final.content if result.final else None
    tools = [m for m in messages if isinstance(m, ToolMessage)]

    if "result" in expected:
        check(name, "result", expected["result"], final_text)
    if expected.get("error") in THEIR_ERRORS.values():  # a turn that ended without answer
        check(name, "error", expected["error"], THEIR_ERRORS.get(result.stop_reason))
        assert result.status == "failed"
        if "error_reason" in expected:
            assert result.error and expected["error_reason"] in result.error, result.error
    elif "error" in expected:
        check(name, "error", expected["error"], result.error)
    if "iterations" in expected:
        check(name, "iterations", expected["iterations"], result.turns)
    if "total_messages" in expected:
        check(name, "total_messages", expected["total_messages"], their_count(messages))
    if "message_sequence" in expected:
        check(
            name,
            "message_sequence",
            expected["message_sequence"],
            [their_shape(m) for m in messages],
        )
    if "tool_result_message" in expected:
        first = tools[0]
        shaped = {
            "role": "tool",
            "content": [{"type": "text", "text": first.content}],
            "metadata": {"tool_call_id": first.tool_call_id},
        }
        check(name, "tool_result_message", expected["tool_result_message"], shaped)
    if "assistant_tool_calls_message" in expected:
        calls = next(m for m in messages if isinstance(m, AssistantMessage) and m.tool_calls)
        check(
            name,
            "assistant_tool_calls_message",
            expected["assistant_tool_calls_message"],
            their_shape(calls),
        )
    if "denied_tools" in expected:
        denied = [t.tool_name for t in tools if t.approval and t.approval.decision == "denied"]
        check(name, "denied_tools", expected["denied_tools"], denied)
    if "tool_execution_order" in expected:
        order = [n for _, _, n, _ in sorted(run.executed)]
        check(name, "tool_execution_order", expected["tool_execution_order"], order)
    if expected.get("trimmed_messages") is None and "trimmed_messages" in expected:
        # nothing trimmed: every message was sent
        assert requests[-1]["messages"][: len(vector["input"]["messages"])] == [
            {"role": m["role"], "content": m["content"]} for m in vector["input"]["messages"]
        ]
    elif "trimmed_messages" in expected:
        # requests[0] asked for the summary; the first model turn's request is trimmed
        check(name, "trimmed_messages", expected["trimmed_messages"], requests[1]["messages"])
        assert len(messages) >= len(vector["input"]["messages"]), "the array keeps everything"
    if "summary_contains" in expected:  # the summary the first trimmed request carries
        summaries = [
            m["content"]
            for m in requests[1]["messages"]
            if m["role"] == "system" and str(m["content"]).startswith(SUMMARY_PREFIX)
        ]
        check(
            name,
            "summary_contains",
            True,
            any(expected["summary_contains"] in s for s in summaries),
        )
    if "events" in expected and where == "workflow":  # the live log is the workflow's
        theirs = their_events(run.events, messages)
        assert matches(expected["events"], theirs), f"{name}.events: {theirs}"
    if "tools_executed" in expected:
        check(name, "tools_executed", expected["tools_executed"], len(run.executed))
    for turn in vector["sequence"][: result.turns]:
        for call_id, args in (
            (c["id"], c["arguments"]) for c in turn.get("expected_tool_calls") or []
        ):
            sent = next(
                c
                for m in messages
                if isinstance(m, AssistantMessage)
                for c in m.tool_calls or []
                if c.id == call_id
            )
            assert json.loads(sent.function.arguments) == args
        for tool_name, args in (turn.get("expected_execution_args") or {}).items():
            assert [a for _, _, n, a in run.executed if n == tool_name] == [args]
    if name == "tool_not_registered_error":
        assert tools[0].is_error and tools[0].content.startswith(
            "Tool not registered: unknown_tool"
        )
        assert final_text == "I cannot do that."
