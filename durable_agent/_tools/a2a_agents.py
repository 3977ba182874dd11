"""Remote A2A agents as tools (the ``a2a_agent`` kind), through the official SDK's
client (``a2a-sdk``).

The worker's owner registers each remote agent by name (``RemoteAgents({"billing":
RemoteAgent(url=...)})`` on the worker's ``Registry``); a spec names one
(``{"kind": "a2a_agent", "name": "billing"}``), never a URL: a name the owner did not
register fails the session's start, before any request. The model gets one tool,
``<name>_ask``, taking the ``task`` for the remote agent.

Each call is one activity and one message. The message's id is derived from the call's
idempotency key (the session, the turn, the slot), so a send made again is the same
message, which the remote can recognise; the remote's task id is noted with the
activity's heartbeats the moment it is known, so an attempt after a lost worker reads
the task (``GetTask``, then ``SubscribeToTask`` or polling until it settles) instead
of sending again. All calls of one session to one remote share a context id (derived
from the session and the name), so the remote keeps one conversation with the session.

What comes back is the tool's result: the remote's artifacts' text (or its final
message's) when the task completes; when the remote asks for input (``input-required``
or ``auth-required``) its question, marked as such, for the model to answer with the
tool's next call (the same context, so the remote reads it as the answer); a failed,
rejected or cancelled task is an error result naming its state.

Only the registered origin is reached: redirects are never followed, and a card that
names its endpoint on another scheme, host or port is refused.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from durable_agent._errors import NotAllowed, NotRegistered
from durable_agent._spec.tool_kinds import ResolvedTool, ToolKind, ToolTarget, WorkerSide
from durable_agent._spec.tools import ApprovalMode, ToolContext, ToolPolicy, ToolsetSpec
from durable_agent._wire.messages import ToolDefinition

#: The one tool each remote agent gives (the model sees ``<name>_ask``).
TOOL = "ask"
#: How often a task read back after a lost worker is asked again, when the remote
#: streams nothing (seconds).
POLL_SECONDS = 1.0
#: Task states after which the remote does no more without a new message.
SETTLED = frozenset(
    {"completed", "failed", "canceled", "rejected", "input_required", "auth_required"}
)
_IDS = uuid.UUID("5f0c1a52-8f39-4a39-9d1f-2b1e3c0a7d11")


@dataclass(frozen=True)
class RemoteAgent:
    """An A2A agent sessions may call by name: its base URL (its card at
    ``card_path`` under it), the headers its requests carry, each read from a worker
    variable at every call (``{"Authorization": "BILLING_AGENT_AUTH"}``: the variable
    holds the header's whole value), what the model reads about it (unset: its card's
    description), how long one call may take, and whether a person approves each
    call."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    description: str | None = None
    timeout_seconds: float = 300.0
    approval: ApprovalMode = "never"
    card_path: str = "/.well-known/agent-card.json"

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"RemoteAgent url {self.url!r}: an http:// or https:// URL")


class RemoteAgentTool(ToolTarget):
    """The tool of one registered remote agent, by its name."""

    kind: Literal["a2a_agent"] = "a2a_agent"
    agent: str


class RemoteAgents(ToolKind[RemoteAgentTool, RemoteAgentTool]):
    """The ``a2a_agent`` kind over the remote agents the worker's owner registers (name
    -> ``RemoteAgent``, or its URL)."""

    name = "a2a_agent"
    target = RemoteAgentTool

    def __init__(self, agents: Mapping[str, RemoteAgent | str]) -> None:
        self.agents = {
            name: a if isinstance(a, RemoteAgent) else RemoteAgent(a) for name, a in agents.items()
        }

    def agent(self, name: str) -> RemoteAgent:
        found = self.agents.get(name)
        if found is None:
            known = ", ".join(sorted(self.agents)) or "none"
            raise NotRegistered(
                f"remote agent {name!r} is not registered on this worker (registered: {known})"
            )
        return found

    def source_name(self, source: Any) -> str:
        return f"remote agent {source.name!r}"

    def where(self, call: RemoteAgentTool) -> str:
        return f"remote agent {call.agent!r}"

    async def list_tools(self, source: ToolsetSpec, worker: WorkerSide) -> list[ResolvedTool]:
        remote = self.agent(source.name)
        about = remote.description or (
            f"Ask the agent {source.name!r} to do a task, in words; its answer is the result. "
            "When it asks a question back, call this again with the answer."
        )
        task = {"type": "string", "description": "What the agent should do, in plain words"}
        schema = {"type": "object", "properties": {"task": task}, "required": ["task"]}
        return [
            ResolvedTool(
                definition=ToolDefinition(name=TOOL, description=about, parameters=schema),
                policy=ToolPolicy(
                    approval=remote.approval,
                    timeout_seconds=remote.timeout_seconds,
                    max_attempts=1,  # a failed task is the remote's answer, not a flake
                ),
                target=RemoteAgentTool(agent=source.name),
            )
        ]

    async def run(
        self,
        call: RemoteAgentTool,
        arguments: dict[str, Any],
        context: ToolContext,
        worker: WorkerSide,
    ) -> tuple[str, bool]:
        remote = self.agent(call.agent)
        task = arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            return 'Give the agent a task: {"task": "..."}', True
        resumed = context.resumed if isinstance(context.resumed, dict) else {}
        return await ask(remote, call.agent, task, context, resumed)


def message_id(context: ToolContext) -> str:
    """The call's message id: the same on every attempt of the call."""
    return uuid.uuid5(_IDS, f"message:{context.idempotency_key}").hex


def context_id(session_id: str, agent: str) -> str:
    """The remote conversation a session keeps with one agent."""
    return uuid.uuid5(_IDS, f"context:{session_id}:{agent}").hex


async def ask(
    remote: RemoteAgent, name: str, task: str, context: ToolContext, resumed: dict[str, Any]
) -> tuple[str, bool]:
    """Send the task (or read back the one an earlier attempt sent, ``resumed``: its id
    and the artifacts it held before) and wait for the remote to settle it: the tool's
    text, and whether it is an error."""
    task_id = resumed.get("task_id")
    import httpx  # a worker without remote agents never loads it
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
    from a2a.client.errors import AgentCardResolutionError
    from a2a.types import a2a_pb2 as pb

    headers = {h: os.environ.get(var, "") for h, var in remote.headers.items()}
    async with httpx.AsyncClient(
        headers=headers, timeout=remote.timeout_seconds, follow_redirects=False
    ) as http:
        try:
            card = await A2ACardResolver(http, remote.url, remote.card_path).get_agent_card()
        except AgentCardResolutionError as error:
            raise NotAllowed(
                f"remote agent {name!r}: its card could not be read ({error}); a redirect is "
                "not followed: register the URL the agent now answers at"
            ) from None
        strays = [i.url for i in card.supported_interfaces if origin(i.url) != origin(remote.url)]
        if strays:
            raise NotAllowed(
                f"remote agent {name!r}: its card names an endpoint on another host "
                f"({strays[0]}), which this worker does not reach; register that URL instead"
            )
        streaming = card.capabilities.streaming
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)
        state = _Seen(pb, resumed.get("before"))
        if task_id is None:
            message = pb.Message(
                message_id=message_id(context),
                context_id=context_id(context.session_id, name),
                role=pb.ROLE_USER,
            )
            message.parts.append(pb.Part(text=task))
            async for event in client.send_message(pb.SendMessageRequest(message=message)):
                found = state.read(event)
                if found and found != task_id:
                    task_id = found
                    context.note({"task_id": task_id, "before": sorted(state.before)})
        if state.reply is not None:  # the remote answered with a message, no task
            return state.reply, False
        if task_id is None:
            raise RuntimeError(f"remote agent {name!r} answered with neither a task nor a message")
        while state.status not in SETTLED:
            if streaming:
                request = pb.SubscribeToTaskRequest(id=task_id)
                async for event in _ended_streams(client.subscribe(request)):
                    state.read(event)
            if state.status not in SETTLED:
                got = await client.get_task(pb.GetTaskRequest(id=task_id))
                state.read_task(got)
            if state.status not in SETTLED:
                await asyncio.sleep(POLL_SECONDS)
    return state.result(name)


async def _ended_streams(events: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A subscription's events; a task that is over (the remote refuses to follow it)
    ends the stream, and the task is read instead."""
    from a2a.client.errors import A2AClientError
    from a2a.utils.errors import A2AError

    try:
        async for event in events:
            yield event
    except (A2AError, A2AClientError):
        return


class _Seen:
    """What the remote said of the task so far: its state, its artifacts' text, its
    status message."""

    def __init__(self, pb: Any, before: list[str] | None = None) -> None:
        self.pb = pb
        self.status = "submitted"
        self.artifacts: dict[str, list[str]] = {}
        self.before: set[str] = set(before or [])
        """Artifacts the task held before this message (a remote whose task is a whole
        conversation keeps its earlier answers): not this call's answer."""
        self.started = before is not None
        self.said = ""
        self.reply: str | None = None

    def read(self, event: Any) -> str | None:
        """Take one stream event in; the task id it names, if any."""
        kind = event.WhichOneof("payload")
        if kind == "task":
            self.read_task(event.task)
            return str(event.task.id)
        if kind == "message":
            self.reply = _text(event.message.parts)
            return None
        if kind == "status_update" or kind == "artifact_update":
            self.started = True  # (a remote that streams no task first)
        if kind == "status_update":
            self._status(event.status_update.status)
            return str(event.status_update.task_id)
        if kind == "artifact_update":
            update = event.artifact_update
            ident = update.artifact.artifact_id
            texts = [_text(update.artifact.parts)]
            self.artifacts[ident] = (
                [*self.artifacts.get(ident, []), *texts] if update.append else texts
            )
            return str(update.task_id)
        return None

    def read_task(self, task: Any) -> None:
        if not self.started:  # the first sight of the task: what it held already
            self.before = {a.artifact_id for a in task.artifacts}
            self.started = True
        self._status(task.status)
        for artifact in task.artifacts:
            self.artifacts[artifact.artifact_id] = [_text(artifact.parts)]

    def _status(self, status: Any) -> None:
        name = self.pb.TaskState.Name(status.state)
        self.status = name.removeprefix("TASK_STATE_").lower()
        if status.HasField("message"):
            self.said = _text(status.message.parts)

    def result(self, name: str) -> tuple[str, bool]:
        if self.status in ("input_required", "auth_required"):
            return f"The agent {name!r} asks (answer it with your next call): {self.said}", False
        if self.status != "completed":
            why = f": {self.said}" if self.said else ""
            return f"The agent {name!r} ended the task as {self.status}{why}", True
        fresh = [p for ident, p in self.artifacts.items() if ident not in self.before]
        answer = "\n".join("".join(parts) for parts in fresh if any(parts))
        return answer or self.said or f"The agent {name!r} completed the task without words", False


def _text(parts: Any) -> str:
    """A message's or artifact's text parts, and its data parts as JSON."""
    from google.protobuf import json_format

    found: list[str] = []
    for part in parts:
        if part.text:
            found.append(part.text)
        elif part.HasField("data"):
            found.append(json.dumps(json_format.MessageToDict(part.data), ensure_ascii=False))
    return "\n".join(found)


def origin(url: str) -> str:
    """Scheme, host and port: what the card's endpoint must share with the registered
    URL."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"
