"""A support agent that remembers a user across sessions, with the built-in model (no
key, no network): in a first session Alice says which plan she is on and the agent
remembers it; in a second session, days later in real life, it recalls it. Bob, another
user, asks the same question and finds nothing: his memories are his own.

    python -m examples.support_memory
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from tempfile import mkdtemp

from durable_agent import Agent, AgentClient, AssistantMessage, ModelSpec, Registry
from durable_agent.capabilities import Memory
from durable_agent.testing import FunctionModel, ModelRequest, assistant_calls, assistant_text


def support_model(request: ModelRequest) -> AssistantMessage:
    """Remembers what a user says after "remember:", and recalls for any question."""
    question = str(request.messages[-1].content)
    results = [m for m in request.since_last_user() if m.role == "tool"]
    if results:
        found = json.loads(str(results[-1].content)) if "{" in str(results[-1].content) else {}
        memories = found.get("memories", [])
        if "memories" not in found:
            return assistant_text("Thanks, I will remember that.")
        if not memories:
            return assistant_text("I have nothing on file for you yet.")
        return assistant_text("From your file: " + "; ".join(m["text"] for m in memories))
    if question.lower().startswith("remember:"):
        fact = question.split(":", 1)[1].strip()
        return assistant_calls(("customers_remember", {"key": "plan", "text": fact}))
    return assistant_calls(("customers_recall", {"query": question}))


def support_agent(model: FunctionModel) -> Agent[str]:
    return Agent(
        name="support",
        model=ModelSpec(name="support-model", endpoint=model.endpoint),
        instructions="Help the customer; remember what they tell you about their account.",
        settings={"toolsets": [{"kind": "memory", "name": "customers"}]},
    )


def customer_memory(folder: Path) -> Memory:
    """One namespace per user of each tenant: the worker fills it from the session's
    owner (the gateway's authenticated user), never from what the model writes."""
    return Memory(
        f"sqlite:///{folder / 'memory.sqlite'}",
        {"customers": "tenant/{tenant}/user/{user}"},
        tenants={"token:alice": "acme", "token:bob": "globex"},
    )


async def conversation(client: AgentClient, agent: Agent[str], owner: str, text: str) -> str:
    session = await client.start(agent, text, owner=owner, one_reply=True)
    result = await client.session(session).result()
    return "" if result.final is None else str(result.final.content)


async def main() -> list[str]:
    from examples._running import running

    folder = Path(mkdtemp())
    with FunctionModel(support_model) as model:
        agent = support_agent(model)
        registry = Registry([customer_memory(folder)])
        async with running("support-memory", agents=[agent], registry=registry) as temporal:
            client = AgentClient(temporal, task_queue="support-memory")
            said = [
                await conversation(client, agent, "token:alice", "remember: on the Pro plan"),
                await conversation(client, agent, "token:alice", "which plan am I on?"),
                await conversation(client, agent, "token:bob", "which plan am I on?"),
            ]
    for line in said:
        print(line)
    return said


if __name__ == "__main__":
    asyncio.run(main())
