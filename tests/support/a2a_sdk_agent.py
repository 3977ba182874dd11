"""An A2A agent built with the official SDK's own server (``a2a-sdk``: its request
handler, task store and JSON-RPC routes), served on 127.0.0.1: a remote agent that is
not ours. It answers each message with an artifact, ``echo: <text>``, and records
the ids of the messages it received."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette


class Echo(AgentExecutor):
    def __init__(self) -> None:
        self.received: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        self.received.append(context.message.message_id)
        task = context.current_task or new_task_from_user_message(context.message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([pb.Part(text=f"echo: {context.get_user_input()}")])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@asynccontextmanager
async def sdk_agent() -> AsyncIterator[tuple[str, Echo]]:
    """The SDK's server with the echo agent: its base URL, and the agent."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    card = pb.AgentCard(
        name="echo",
        description="says back what it is told",
        version="1.0.0",
        supported_interfaces=[
            pb.AgentInterface(url=f"{base}/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=pb.AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[pb.AgentSkill(id="echo", name="echo", description="echoes", tags=["echo"])],
    )
    echo = Echo()
    handler = DefaultRequestHandler(echo, InMemoryTaskStore(), card)
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        yield base, echo
    finally:
        server.should_exit = True
        await serving
