"""A reminder agent that wakes itself: asked to remind you of something later, it sets a
wake-up with its ``wake_ups`` tools, and when the wake-up falls due it reads it (marked
as a wake-up, not as your words) and reminds you. The session sleeps on a durable timer
in between: no worker holds it, and a restart or a deploy does not lose it.

It runs with its own built-in model (no key, no network): a small function that
answers as a tool-using model would. Point ``reminder_agent(model)`` at a real one to
let a model decide.

    python -m examples.reminder_agent
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from durable_agent import Agent, AgentClient, AssistantMessage, ModelSpec
from durable_agent.testing import FunctionModel, ModelRequest, assistant_calls, assistant_text

#: The owner enables the wake-up tools for this agent (``wake_ups_set``, ``_list``,
#: ``_cancel``); the worker's ``Capabilities.wake_ups`` bounds them.
WAKE_UPS = {"kind": "wake_ups", "name": "wake_ups"}
ASKED = re.compile(r"remind me in (\d+) seconds? to (.+?)\.?$", re.I)


def reminder_agent(model: ModelSpec) -> Agent[str]:
    return Agent(
        name="reminders",
        model=model,
        instructions=(
            "When the user asks to be reminded later, set a wake-up with wake_ups_set. "
            "When a wake-up arrives, remind the user of it in one sentence."
        ),
        settings={"toolsets": [WAKE_UPS]},
    )


def built_in_model(request: ModelRequest) -> AssistantMessage:
    """The reminder agent's model without a provider: set a wake-up when asked, confirm,
    and remind when the wake-up comes."""
    messages: list[dict[str, Any]] = request.body["messages"]
    last = messages[-1]
    text = last["content"] if isinstance(last["content"], str) else ""
    if last["role"] == "tool":
        return assistant_text("I will remind you.")
    if text.startswith("[Wake-up"):
        return assistant_text(f"Reminder: {text.split('] ', 1)[1]}.")
    asked = ASKED.search(text)
    if asked is None:
        return assistant_text("Ask me: remind me in 2 seconds to stretch.")
    wake_up = {"text": asked[2], "after_seconds": int(asked[1])}
    return assistant_calls(("wake_ups_set", wake_up))


async def remind(agents: AgentClient, agent: Agent[str], ask: str) -> list[str]:
    """Ask ``agent`` for a reminder and wait for it: what the agent said, in order."""
    session = agents.session(await agents.start(agent, ask))
    said: list[str] = []
    after = 0
    while not any(line.startswith("Reminder:") for line in said):
        outcome = await session.wait(after=after, timeout=60)
        after += len(outcome.messages)
        said += [m.content for m in outcome.messages if isinstance(m, AssistantMessage)]
        said = [line for line in said if line]
    await session.end(reason="reminded")
    return said


async def main() -> None:
    from examples._running import running

    with FunctionModel(built_in_model) as model:
        agent = reminder_agent(ModelSpec(name="reminder-model", endpoint=model.endpoint))
        async with running("reminders", agents=[agent]) as client:
            said = await remind(
                AgentClient(client, task_queue="reminders"),
                agent,
                "Remind me in 2 seconds to stretch.",
            )
    for line in said:
        print(line)


if __name__ == "__main__":
    asyncio.run(main())
