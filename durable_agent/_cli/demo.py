"""``durable-agent demo``: everything in one process tree on a fresh machine.

The embedded Temporal dev server (SQLite in the data folder), a worker, and one
session that makes a parallel batch of tool calls, pauses for an approval (which
the demo grants through AgentClient, as a person would), and answers.

The model is a deterministic stand-in (a ``FunctionModel``), so the demo runs with no
key and no network; the tools are a lookup that runs in parallel and an action a person
approves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

from durable_agent._agents import Agent
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.boundary import DEFAULT_TASK_QUEUE
from durable_agent._providers import model_from_environment
from durable_agent._spec.document import ModelSpec
from durable_agent._spec.tools import ToolContext
from durable_agent._tools.functions import tool
from durable_agent._wire.messages import AssistantMessage
from durable_agent.capabilities import Capabilities
from durable_agent.temporal._local import free_port
from durable_agent.testing import FunctionModel, ModelRequest, assistant_calls, assistant_text

from .render import format_message, format_pending

# The demo agent's tools: a lookup that runs in parallel, and an action a person approves.

WEATHER = {
    "NYC": "72F and sunny",
    "London": "55F with light rain",
    "Paris": "64F and cloudy",
    "Tokyo": "68F and clear",
}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city (NYC, London, Paris or Tokyo)."""
    return WEATHER.get(city, f"no weather station for {city}")


@tool(approval="always")
def send_report(to: str, text: str, ctx: ToolContext) -> str:
    """Email a short report. A person approves every message before it goes out."""
    return f"report sent to {to} (message id {ctx.idempotency_key})"


# A deterministic stand-in for a chat model, so the demo runs with no key and no network.
#
# A ``FunctionModel`` (``durable_agent.testing``): it reads the Chat Completions request
# it is sent (the same bytes a real provider gets) and answers the way a tool-using model
# would: look up every city mentioned, in one parallel batch; then ask to send a report
# (which needs a person's approval); then answer from the tool results.

DEMO_MODEL = "durable-agent-demo-model"
REPORT_TO = "you@example.com"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def demo_model_reply(request: ModelRequest) -> AssistantMessage:
    messages: list[dict[str, Any]] = request.body["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    question = _text(messages[last_user]["content"])
    since = messages[last_user + 1 :]
    results = [m for m in since if m["role"] == "tool"]
    cities = [city for city in WEATHER if city.lower() in question.lower()]
    if not cities:
        return assistant_text(
            "I can look up the weather in " + ", ".join(WEATHER) + " and email you a report."
        )
    if not results:
        return assistant_calls(*[("get_weather", {"city": city}) for city in cities])
    weather = "; ".join(
        f"{city}: {result['content']}" for city, result in zip(cities, results, strict=False)
    )
    if len(results) == len(cities):
        return assistant_calls(("send_report", {"to": REPORT_TO, "text": f"Weather: {weather}"}))
    report = results[-1]
    if "denied" in _text(report["content"]).lower():
        return assistant_text(f"Weather: {weather}. I did not send the report: {report['content']}")
    return assistant_text(f"Weather: {weather}. The report went to {REPORT_TO}.")


QUESTION = "What's the weather in NYC and London? Email me a short report."
INSTRUCTIONS = "You are a weather assistant. Use the tools; email a report when asked."


#: The name the demo's worker registers its model endpoint by.
DEMO_ENDPOINT = "demo"


def demo_agent(model: ModelSpec) -> Agent[str]:
    """The demo's agent: its tools are functions on the worker; its model endpoint is
    one the worker registered, by name."""
    return Agent(
        name="weather",
        model=model,
        instructions=INSTRUCTIONS,
        tools=[get_weather, send_report],
    )


async def run_demo(
    data_dir: Path, *, keep: bool = False, out: Callable[[str], None] = print
) -> int:
    from durable_agent.temporal import build_worker, start_dev_server

    port, ui_port = free_port(), free_port()
    with ExitStack() as stack:
        found = model_from_environment()
        if found is None or isinstance(found.endpoint, str):
            demo = stack.enter_context(FunctionModel(demo_model_reply))
            endpoint, name = demo.endpoint, DEMO_MODEL
            out(f"model: the built-in demo model, over HTTP at {endpoint.base_url}")
        else:
            endpoint, name = found.endpoint, found.name
            out(f"model: {name} at {endpoint.base_url}")
        # the worker registers the endpoint; the session names it
        capabilities = Capabilities(models={DEMO_ENDPOINT: endpoint})
        model = ModelSpec(name=name, endpoint=DEMO_ENDPOINT)
        env = await start_dev_server(data_dir, port, ui_port)
        ui = f"http://127.0.0.1:{ui_port}"
        out(f"Temporal dev server: 127.0.0.1:{port} (data in {data_dir}); UI: {ui}")
        try:
            agent = demo_agent(model)
            worker = build_worker(
                env.client,
                task_queue=DEFAULT_TASK_QUEUE,
                capabilities=capabilities,
                agents=[agent],
            )
            async with worker:
                agents = AgentClient(env.client)
                session_id = await agents.start(agent.spec(), QUESTION)
                out(f"session: {session_id}\n")
                ok = await _follow(agents, session_id, out)
                out(f"\nSee it in the Temporal UI: {ui}/namespaces/default/workflows/{session_id}")
                if keep:
                    out("The server stays up until Ctrl-C.")
                    await _until_interrupted()
        finally:
            await env.shutdown()
    return 0 if ok else 1


async def _follow(agents: AgentClient, session_id: str, out: Callable[[str], None]) -> bool:
    """Print the session as it goes, approve what it asks (as a person would), end it
    after its answer; whether it answered and ended well."""
    answered = False
    async for event in agents.session(session_id).follow():
        if event.type == "message_appended":
            message = event.message or (await agents.session(session_id).messages(event.index))[0]
            out(format_message(message))
        elif event.type == "approval_requested":
            pending = event.approval
            out(f"\n  approval needed: {format_pending(pending)}")
            await agents.session(session_id).approve(
                pending.approval_id, by="demo", reason="approved by the demo"
            )
            out(f"  approved {pending.approval_id} (SessionHandle.approve, by 'demo')\n")
        elif event.type == "idle" and not answered:
            answered = True
            await agents.session(session_id).end(reason="demo finished")
        elif event.type == "ended":
            result = event.result
            if result is None:
                out("\nsession ended without a result")
                return False
            out(
                f"\nsession ended: {result.status} ({result.stop_reason}), "
                f"{result.turns} model calls"
            )
            return answered and result.status == "done"
    return False


async def _until_interrupted() -> None:
    with suppress(asyncio.CancelledError):
        await asyncio.Event().wait()
