"""A2A clients for the tests: the official SDK's (``a2a-sdk``), reading a gateway's
card over real HTTP and speaking the version a test asks for."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format, struct_pb2


@asynccontextmanager
async def a2a_client(
    base: str,
    *,
    agent_path: str = "",
    token: str | None = None,
    version: str = "1.0",
    streaming: bool = True,
) -> AsyncIterator[tuple[Client, pb.AgentCard]]:
    """The SDK's client for the agent whose card is at ``base + agent_path``, speaking
    ``version`` (the card offers 1.0 and 0.3: a 0.3 client is made from the card's 0.3
    interface alone, as an older peer reads it)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, base + agent_path).get_agent_card()
        chosen = pb.AgentCard()
        chosen.CopyFrom(card)
        del chosen.supported_interfaces[:]
        chosen.supported_interfaces.extend(
            i for i in card.supported_interfaces if i.protocol_version == version
        )
        config = ClientConfig(httpx_client=http, streaming=streaming)
        client = ClientFactory(config).create(chosen)
        yield client, card


def text_message(text: str, *, context_id: str = "", task_id: str = "") -> pb.SendMessageRequest:
    message = pb.Message(
        message_id=uuid.uuid4().hex, role=pb.ROLE_USER, context_id=context_id, task_id=task_id
    )
    message.parts.append(pb.Part(text=text))
    return pb.SendMessageRequest(message=message)


def data_message(data: dict[str, Any], *, task_id: str) -> pb.SendMessageRequest:
    value = struct_pb2.Value()
    json_format.ParseDict(data, value)
    message = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, task_id=task_id)
    message.parts.append(pb.Part(data=value))
    return pb.SendMessageRequest(message=message)


async def events_of(client: Client, request: pb.SendMessageRequest) -> list[pb.StreamResponse]:
    return [event async for event in client.send_message(request)]


def state_name(state: int) -> str:
    return pb.TaskState.Name(state)  # type: ignore[arg-type]
