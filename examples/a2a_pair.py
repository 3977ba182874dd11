"""Two agents that talk over A2A: a billing agent served by the gateway as an A2A agent
(its card at ``/a2a/billing/.well-known/agent-card.json``), and a front-desk agent
that calls it as a tool (``billing_ask``) through the worker's registered remote
agents. Each call is one A2A message, sent once even when a worker is lost mid-call.

Both run with built-in models (no key, no network beyond 127.0.0.1): small functions
that answer as a tool-using model would.

    python -m examples.a2a_pair
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import uvicorn

from durable_agent import Agent, AgentClient, AssistantMessage, ModelSpec, Registry
from durable_agent.capabilities import RemoteAgent, RemoteAgents
from durable_agent.gateway import create_app
from durable_agent.testing import FunctionModel, ModelRequest, assistant_calls, assistant_text

TASK_QUEUE = "a2a-pair"


def billing_model(request: ModelRequest) -> AssistantMessage:
    """The billing agent: it knows one invoice."""
    messages: list[dict[str, Any]] = request.body["messages"]
    asked = str(messages[-1]["content"])
    if "invoice 7" in asked.lower():
        return assistant_text("Invoice 7 was paid on May 2.")
    return assistant_text("I only know invoice 7.")


def desk_model(request: ModelRequest) -> AssistantMessage:
    """The front desk: it hands billing questions to the billing agent."""
    messages: list[dict[str, Any]] = request.body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return assistant_text(f"Billing says: {last['content']}")
    return assistant_calls(("billing_ask", {"task": str(last["content"])}))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def main() -> str:
    from examples._running import running

    port = free_port()
    with FunctionModel(billing_model) as billing_llm, FunctionModel(desk_model) as desk_llm:
        billing: Agent[str] = Agent(
            name="billing",
            model=ModelSpec(name="billing-model", endpoint=billing_llm.endpoint),
            instructions="Answer questions about invoices.",
        )
        desk: Agent[str] = Agent(
            name="desk",
            model=ModelSpec(name="desk-model", endpoint=desk_llm.endpoint),
            instructions="Ask the billing agent about invoices.",
            # the spec names the remote agent; the worker's owner says where it is
            settings={"toolsets": [{"kind": "a2a_agent", "name": "billing"}]},
        )
        remote = RemoteAgent(url=f"http://127.0.0.1:{port}/a2a/billing")
        registry = Registry([RemoteAgents({"billing": remote})])
        async with running(TASK_QUEUE, agents=[billing, desk], registry=registry) as client:
            agents = AgentClient(client, task_queue=TASK_QUEUE)
            # the billing agent as an A2A agent: the gateway, served on 127.0.0.1
            app = create_app(agents, None, named={"billing": billing.spec()})
            config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
            server = uvicorn.Server(config)
            serving = asyncio.create_task(server.serve())
            try:
                for _ in range(200):  # until it listens (uvicorn says when)
                    if server.started:
                        break
                    await asyncio.sleep(0.05)
                run = await agents.run(desk, "Is invoice 7 paid?")
            finally:
                server.should_exit = True
                await serving
    return str(run.output)


if __name__ == "__main__":
    print(asyncio.run(main()))
