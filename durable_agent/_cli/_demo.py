"""``durable-agent demo``: everything in one process tree on a fresh machine.

The embedded Temporal dev server (SQLite in the data folder), a worker, and one
session that makes a parallel batch of tool calls, pauses for an approval (which
the demo grants through AgentClient, as a person would), and answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path

from durable_agent._agents._agent import Agent
from durable_agent._client._client import AgentClient
from durable_agent._contracts._contracts import DEFAULT_TASK_QUEUE
from durable_agent._providers._environment import model_from_environment
from durable_agent._spec._spec import ModelSpec
from durable_agent.capabilities import Capabilities
from durable_agent.temporal._ports import free_port
from durable_agent.testing import FunctionModel

from ._demo_model import DEMO_MODEL, demo_model_reply
from ._demo_tools import get_weather, send_report
from ._render import format_message, format_pending

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
