"""A2A (the Agent2Agent protocol): each agent the gateway serves is an A2A agent.

The default agent (``--spec``) has its card at ``/.well-known/agent-card.json`` and
answers JSON-RPC at ``/a2a``; an agent served by name (``--agents``) has its card at
``/a2a/NAME/.well-known/agent-card.json`` and answers at ``/a2a/NAME``. Version 1.0
is spoken, and 0.3 where a client asks for it (``A2A-Version`` missing or ``0.3``,
and 0.3's method names): the official SDK's JSON-RPC dispatcher reads both and
hands this module one request in 1.0's terms.

The translation, onto the same session commands and reads as every door:

- a **context** is a conversation (as AG-UI's thread): one session per caller and
  context id, found by ``GatewayContext.conversation``, so another caller's context
  id names a session of their own, never this one;
- a **task** is that session, and its id is the context id (a message naming a task
  goes to that conversation); ``SendMessage`` starts or continues it,
  ``SendStreamingMessage`` streams its live events as status and artifact updates,
  ``GetTask`` reads its status and array, ``ListTasks`` lists the caller's
  conversations, ``CancelTask`` cancels the turn under way, ``SubscribeToTask``
  streams what is still under way;
- a call waiting for a person is the task's ``input-required`` state; the client's
  next message on the task answers it with a data part ``{"approved": true|false,
  "reason"?, "approval_id"?}`` (no ``approval_id``: every call that waits), decided
  as the caller, signed with the caller's key as on every door;
- each answer of the agent is an artifact (``answer-INDEX``: its index in the array);
- a tool call of ours, or of the provider's own tools (a web search), is a ``working``
  status update that says so.

Push notifications are not offered: the card says so, and their methods answer the
protocol's "push notifications not supported" error (a URL a client gives would be a
host the gateway reaches for someone the owner never asked).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.common import ServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf import json_format, struct_pb2
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from durable_agent._client.results import (
    DecisionRefusedError,
    MessageRefusedError,
    NoWorkerError,
    SessionClosedError,
    SessionNotFoundError,
    UnknownApprovalError,
)
from durable_agent._contracts.approvals import PendingApproval
from durable_agent._contracts.boundary import SessionStatus
from durable_agent._contracts.events import (
    Ended,
    HostedToolUsed,
    Idle,
    MessageAppended,
    ToolStarted,
)
from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import AssistantMessage, Message, UserMessage, text_of
from durable_agent._wire.transcript import sender_id

from ._agui import delivered
from ._context import CONVERSATION_ID, PART, GatewayContext, HttpError, json_errors

#: An A2A context (and task) id: what a conversation id may hold, less ``:``, which
#: separates an agent served by name from its contexts in the conversation's id.
CONTEXT_ID = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
WELL_KNOWN = "/.well-known/agent-card.json"
#: The session phases of a turn under way (the task is ``working``).
UNDER_WAY = frozenset(
    {"starting", "checking_guardrails", "compacting", "calling_model", "running_tools"}
)
STATE = {
    "awaiting_approval": pb.TASK_STATE_INPUT_REQUIRED,
    "running_tools": pb.TASK_STATE_WORKING,
    "idle": pb.TASK_STATE_COMPLETED,
    "done": pb.TASK_STATE_COMPLETED,
    "failed": pb.TASK_STATE_FAILED,
}
#: Most tasks one ``ListTasks`` page holds.
MAX_PAGE = 100
#: The caller's newest sessions a listing looks through.
LISTED = 1000


def a2a_routes(gateway: GatewayContext, named: Sequence[str], default: bool) -> list[Route]:
    """The card and JSON-RPC routes of the default agent (when the gateway has one)
    and of each agent served by name (any other name: 404)."""
    doors = {
        agent: JsonRpcDispatcher(A2aDoor(gateway, agent), _Caller(), enable_v0_3_compat=True)
        for agent in ([None] if default else []) + list(named)
    }

    def door_of(request: Request) -> str | None:
        agent = request.path_params.get("agent")
        if agent not in doors:
            listed = ", ".join(sorted(a or "(default)" for a in doors)) or "none"
            raise HttpError(404, f"no A2A agent {agent or '(default)'!r} here (agents: {listed})")
        return agent if isinstance(agent, str) else None

    async def rpc(request: Request) -> Response:
        return await doors[door_of(request)].handle_requests(request)

    async def card(request: Request) -> Response:
        agent = door_of(request)
        url = str(request.base_url).rstrip("/") + ("/a2a" if agent is None else f"/a2a/{agent}")
        found = agent_card(gateway.needs_spec(agent), agent, url)
        return JSONResponse(agent_card_to_dict(found))

    return [
        Route(WELL_KNOWN, json_errors(card), methods=["GET"]),
        Route("/a2a", json_errors(rpc), methods=["POST"]),
        Route("/a2a/{agent}" + WELL_KNOWN, json_errors(card), methods=["GET"]),
        Route("/a2a/{agent}", json_errors(rpc), methods=["POST"]),
    ]


def agent_card(spec: AgentSpec, agent: str | None, url: str) -> pb.AgentCard:
    """The card: the agent's name, one skill per tool, streaming, no push
    notifications, the gateway's bearer token as its security, JSON-RPC at ``url``
    in 1.0 and 0.3. The spec's instructions stay out of it: they are the owner's words
    to the model, not a description for callers."""
    name = agent or "agent"
    about = f"The {name} agent, a durable session per conversation"
    skills = [
        pb.AgentSkill(id=tool, name=tool, description=f"uses the tool {tool}", tags=["tool"])
        for tool in _tool_names(spec)
    ] or [pb.AgentSkill(id="chat", name=name, description=about, tags=["chat"])]
    bearer = pb.SecurityScheme(
        http_auth_security_scheme=pb.HTTPAuthSecurityScheme(
            scheme="bearer", description="the gateway's own token, or its identity provider's"
        )
    )
    return pb.AgentCard(
        name=name,
        description=about,
        version="1.0.0",
        supported_interfaces=[
            pb.AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=v)
            for v in ("1.0", "0.3")
        ],
        capabilities=pb.AgentCapabilities(streaming=True, push_notifications=False),
        security_schemes={"bearer": bearer},
        security_requirements=[pb.SecurityRequirement(schemes={"bearer": pb.StringList(list=[])})],
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=skills,
    )


class _Caller(ServerCallContextBuilder):
    """The call's context: the request itself, which the one owner check reads (the
    guard has put the caller on it), and its headers, where the SDK reads the
    version the client asks for."""

    def build(self, request: Request) -> ServerCallContext:
        return ServerCallContext(state={"request": request, "headers": dict(request.headers)})


def _request(context: ServerCallContext) -> Request:
    found = context.state.get("request")
    if not isinstance(found, Request):
        raise InternalError(message="the A2A door was called outside the gateway")
    return found


class A2aDoor(RequestHandler):
    """The translation of one agent's A2A requests onto sessions."""

    def __init__(self, gateway: GatewayContext, agent: str | None) -> None:
        self.gateway = gateway
        self.agent = agent

    # -- ids: a context is the caller's conversation; its task has the same id

    def _conversation(self, context_id: str) -> str:
        if not CONTEXT_ID.match(context_id):
            raise InvalidParamsError(message="a context or task id is 1-100 of A-Z a-z 0-9 _ . -")
        return context_id if self.agent is None else f"{self.agent}:{context_id}"

    async def _session(self, request: Request, task_id: str) -> str:
        """The session of the caller's task ``task_id``, when it exists
        (``TaskNotFoundError`` otherwise, for another caller's as for none)."""
        try:
            session_id = await self.gateway.conversation(request, self._conversation(task_id))
        except SessionNotFoundError:
            raise TaskNotFoundError(message=f"no task {task_id!r}") from None
        if await self.gateway.offset(session_id) < 0:
            raise TaskNotFoundError(message=f"no task {task_id!r}")
        return session_id

    # -- send

    async def _send(
        self, params: pb.SendMessageRequest, request: Request
    ) -> tuple[str, str, int, int | None]:
        """Deliver the message: the task's id, its session, where its events are now,
        and the messages the answer comes after (``-1``: any answer; ``None``: no answer
        is under way to wait for: the task is answered already, or still waits for a
        person, the message queued behind the decision)."""
        message = params.message
        task, context = message.task_id, message.context_id
        if task and context and task != context:
            raise InvalidParamsError(
                message="here a task's id is its context's: give one of them, or both alike"
            )
        task_id = task or context or uuid.uuid4().hex
        if task:  # a message naming a task goes to one that exists
            session_id = await self._session(request, task_id)
        else:
            session_id = await self.gateway.conversation(request, self._conversation(task_id))
        after = await self.gateway.offset(session_id)
        answer = _decision(message)
        if answer is not None:
            undecided = await self._decide(request, session_id, task_id, after, answer)
            return task_id, session_id, after, None if undecided else -1
        text = "\n".join(p.text for p in message.parts if p.text)
        if not text.strip():
            raise InvalidParamsError(message="message.parts: no text part to send")
        if not message.message_id:
            raise InvalidParamsError(message="message.messageId: required")
        phase = None
        if after >= 0:
            phase = (await self.gateway.agents.session(session_id).status()).phase
            if await delivered(self.gateway, session_id, message.message_id):
                # sent again: nothing is sent twice; the answer under way, if one is
                return task_id, session_id, after, -1 if phase in UNDER_WAY else None
        said = UserMessage(id=message.message_id, content=text)
        spec = self.gateway.needs_spec(self.agent)
        owner = self.gateway.owner_of(request)
        sent = await self.gateway.agents.converse(session_id, said, spec, owner=owner)
        waits = phase == "awaiting_approval"  # the message waits behind the decision
        return task_id, session_id, after, None if waits else sent.before

    async def _decide(
        self, request: Request, session_id: str, task_id: str, after: int, answer: dict[str, Any]
    ) -> bool:
        """Decide the calls the answer names, as the caller; whether others still wait."""
        if after < 0:
            raise TaskNotFoundError(message=f"no task {task_id!r}")
        pending = (await self.gateway.agents.session(session_id).status()).pending_approvals
        named = answer.get("approval_id")
        chosen = [p for p in pending if named is None or p.approval_id == named]
        if not chosen:
            raise InvalidParamsError(message="no call of this task waits for that decision")
        reason = answer.get("reason")
        for waiting in chosen:
            await self.gateway.decide(
                request,
                session_id,
                waiting.approval_id,
                bool(answer["approved"]),
                reason=reason if isinstance(reason, str) else None,
            )
        return len(chosen) < len(pending)

    async def on_message_send(
        self, params: pb.SendMessageRequest, context: ServerCallContext
    ) -> pb.Task | pb.Message:
        request = _request(context)
        async with _translated():
            task_id, session_id, after, before = await self._send(params, request)
            if before is not None and not params.configuration.return_immediately:
                async for _ in self._follow(task_id, session_id, after, before):
                    pass
            history = params.configuration.history_length or None
            return await self._task(task_id, session_id, history)

    async def on_message_send_stream(
        self, params: pb.SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        request = _request(context)
        async with _translated():
            task_id, session_id, after, before = await self._send(params, request)
            first = await self._task(task_id, session_id, 0)
        if before is None:  # nothing under way: the task as it stands
            yield first
            return
        first.status.state = pb.TASK_STATE_WORKING
        first.status.ClearField("message")
        yield first
        async for event in self._follow(task_id, session_id, after, before):
            yield event

    # -- read

    async def on_get_task(
        self, params: pb.GetTaskRequest, context: ServerCallContext
    ) -> pb.Task | None:
        async with _translated():
            session_id = await self._session(_request(context), params.id)
            history = params.history_length if params.HasField("history_length") else None
            return await self._task(params.id, session_id, history)

    async def on_list_tasks(
        self, params: pb.ListTasksRequest, context: ServerCallContext
    ) -> pb.ListTasksResponse:
        request = _request(context)
        size = min(params.page_size or 50, MAX_PAGE)
        async with _translated():
            principal = self.gateway.principal_of(request)
            # the caller's conversations only (their ids start alike; a name holds no quote)
            where = f'WorkflowId STARTS_WITH "{self._prefix(principal)}"'
            found = await self.gateway.agents.sessions(limit=LISTED, where=where)
            tasks: list[pb.Task] = []
            seen: set[str] = set()
            for summary in found:
                task_id = self._task_id(summary.session_id, principal)
                if task_id is None or not self.gateway.may_see(principal, summary.owner):
                    continue
                if task_id in seen or (params.context_id and params.context_id != task_id):
                    continue  # (a conversation that ran more than once is one task)
                seen.add(task_id)
                history = params.history_length if params.HasField("history_length") else 0
                try:
                    tasks.append(await self._task(task_id, summary.session_id, history))
                except NoWorkerError:  # running, and no worker answers for it now
                    working = pb.TaskStatus(state=pb.TASK_STATE_WORKING)
                    tasks.append(pb.Task(id=task_id, context_id=task_id, status=working))
                if len(tasks) >= size:
                    break
        return pb.ListTasksResponse(tasks=tasks, page_size=size, total_size=len(tasks))

    def _prefix(self, principal: Any) -> str:
        """How the caller's conversations on this agent's door begin."""
        prefix = "conversation-"
        if principal is not None:
            prefix += f"{principal.source}{PART}{principal.name}{PART}"
        return prefix if self.agent is None else f"{prefix}{self.agent}:"

    def _task_id(self, session_id: str, principal: Any) -> str | None:
        """The task id of one of the caller's conversations on this agent, from its
        session's id (``None``: not one)."""
        prefix = self._prefix(principal)
        if not session_id.startswith(prefix):
            return None
        conversation = session_id[len(prefix) :]
        if not CONVERSATION_ID.match(conversation):
            return None
        agent, colon, context_id = conversation.rpartition(":")
        if (agent if colon else None) != self.agent or not CONTEXT_ID.match(context_id):
            return None
        return context_id

    async def on_cancel_task(
        self, params: pb.CancelTaskRequest, context: ServerCallContext
    ) -> pb.Task | None:
        request = _request(context)
        async with _translated():
            session_id = await self._session(request, params.id)
            handle = self.gateway.agents.session(session_id)
            status = await handle.status()
            if status.phase in ("idle", "done", "failed"):
                raise TaskNotCancelableError(message=f"task {params.id!r} has no turn under way")
            by = self.gateway.decided_by(request, None)
            await handle.cancel_turn(by=by, reason="cancelled by the A2A client")
            task = await self._task(params.id, session_id, None)
        task.status.state = pb.TASK_STATE_CANCELED
        return task

    async def on_subscribe_to_task(
        self, params: pb.SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        async with _translated():
            session_id = await self._session(_request(context), params.id)
            after = await self.gateway.offset(session_id)
            task = await self._task(params.id, session_id, 0)
        yield task
        if task.status.state == pb.TASK_STATE_WORKING:
            async for event in self._follow(params.id, session_id, after, -1):
                yield event

    # -- what the door does not offer

    async def on_create_task_push_notification_config(
        self, params: pb.TaskPushNotificationConfig, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_get_task_push_notification_config(
        self, params: pb.GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> pb.TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError()

    async def on_list_task_push_notification_configs(
        self, params: pb.ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> pb.ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError()

    async def on_delete_task_push_notification_config(
        self, params: pb.DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError()

    async def on_get_extended_agent_card(
        self, params: pb.GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> pb.AgentCard:
        raise UnsupportedOperationError(message="this agent has no extended card")

    # -- the task, and its events

    async def _task(self, task_id: str, session_id: str, history: int | None) -> pb.Task:
        """The task as it is now: its status, its answers as artifacts, and its last
        ``history`` messages (``None``: all)."""
        handle = self.gateway.agents.session(session_id)
        status = await handle.status()
        array = await handle.messages()
        found = pb.Task(id=task_id, context_id=task_id, status=_status(status, array, task_id))
        for index, message in enumerate(array):
            if isinstance(message, AssistantMessage) and text_of(message.content).strip():
                found.artifacts.append(_answer(index, message))
        shown = [_message(task_id, i, m) for i, m in enumerate(array)]
        kept = [m for m in shown if m is not None]
        if history is None or history > 0:
            found.history.extend(kept if history is None else kept[-history:])
        return found

    async def _follow(
        self, task_id: str, session_id: str, after: int, before: int
    ) -> AsyncIterator[Event]:
        """The session's events as status and artifact updates, until it answers
        (more than ``before`` messages; ``-1``: any answer), asks a person, or ends;
        the last update is the task's state then."""

        def update(state: int, message: pb.Message | None = None) -> pb.TaskStatusUpdateEvent:
            status = pb.TaskStatus(state=state)  # type: ignore[arg-type]
            if message is not None:
                status.message.CopyFrom(message)
            return pb.TaskStatusUpdateEvent(task_id=task_id, context_id=task_id, status=status)

        handle = self.gateway.agents.session(session_id)
        async for event in self.gateway.hubs.follow(session_id, after):
            if isinstance(event, MessageAppended) and isinstance(event.message, AssistantMessage):
                if text_of(event.message.content).strip():
                    artifact = _answer(event.index, event.message)
                    yield pb.TaskArtifactUpdateEvent(
                        task_id=task_id, context_id=task_id, artifact=artifact, last_chunk=True
                    )
            elif isinstance(event, ToolStarted):
                said = _agent_message(task_id, f"{task_id}-tool-{event.offset}")
                said.parts.append(pb.Part(text=f"calling the tool {event.name}"))
                yield update(pb.TASK_STATE_WORKING, said)
            elif isinstance(event, HostedToolUsed):
                said = _agent_message(task_id, f"{task_id}-hosted-{event.id}")
                ran = f"the provider ran its tool {event.name} ({event.status})"
                said.parts.append(pb.Part(text=f"{ran}: {event.detail}" if event.detail else ran))
                yield update(pb.TASK_STATE_WORKING, said)
            elif isinstance(event, Idle) and event.message_count > before:
                answer = _last_answer(task_id, await handle.messages())
                yield update(pb.TASK_STATE_COMPLETED, answer)
                return
            elif event.type == "approval_requested":
                pending = (await handle.status()).pending_approvals
                yield update(pb.TASK_STATE_INPUT_REQUIRED, _waiting(task_id, pending))
                return
            elif isinstance(event, Ended):
                failed = event.error or (event.result is not None and event.result.status != "done")
                yield update(pb.TASK_STATE_FAILED if failed else pb.TASK_STATE_COMPLETED)
                return


def _status(status: SessionStatus, array: Sequence[Message], task_id: str) -> pb.TaskStatus:
    state = STATE.get(status.phase, pb.TASK_STATE_WORKING)
    found = pb.TaskStatus(state=state)
    if state == pb.TASK_STATE_INPUT_REQUIRED:
        found.message.CopyFrom(_waiting(task_id, status.pending_approvals))
    elif state == pb.TASK_STATE_COMPLETED:
        last = _last_answer(task_id, array)
        if last is not None:
            found.message.CopyFrom(last)
    elif state == pb.TASK_STATE_FAILED and status.last_error:
        said = _agent_message(task_id, f"{task_id}-error")
        said.parts.append(pb.Part(text=status.last_error))
        found.message.CopyFrom(said)
    return found


def _last_answer(task_id: str, array: Sequence[Message]) -> pb.Message | None:
    for index in range(len(array) - 1, -1, -1):
        message = array[index]
        if isinstance(message, AssistantMessage) and text_of(message.content).strip():
            return _message(task_id, index, message)
    return None


def _waiting(task_id: str, pending: Sequence[PendingApproval]) -> pb.Message:
    """What a task in ``input-required`` says: the calls that wait, in words and as
    data, and how to answer."""
    said = _agent_message(task_id, f"{task_id}-waiting-{'-'.join(p.approval_id for p in pending)}")
    lines = [p.for_approver() for p in pending]
    lines.append(
        'Answer with a message on this task holding a data part {"approved": true} or '
        '{"approved": false, "reason": "..."} (add "approval_id" to decide one call).'
    )
    said.parts.append(pb.Part(text="\n".join(lines)))
    waiting = [
        {"approval_id": p.approval_id, "tool": p.tool_name, "arguments": p.arguments}
        for p in pending
    ]
    said.parts.append(pb.Part(data=_value({"approvals": waiting})))
    return said


def _agent_message(task_id: str, message_id: str) -> pb.Message:
    return pb.Message(
        message_id=message_id, context_id=task_id, task_id=task_id, role=pb.ROLE_AGENT
    )


def _message(task_id: str, index: int, message: Message) -> pb.Message | None:
    """A user's or the agent's words in the array as an A2A message (``None``: a tool
    call or result, or a system message, which A2A has no role for). A message a
    client sent keeps its id; the others are named by their index."""
    if isinstance(message, UserMessage):
        role = pb.ROLE_USER
    elif isinstance(message, AssistantMessage):
        role = pb.ROLE_AGENT
    else:
        return None
    text = text_of(message.content)
    if not text.strip():
        return None
    ident = sender_id(message) or f"{task_id}-m{index}"
    found = pb.Message(message_id=ident, context_id=task_id, task_id=task_id, role=role)
    found.parts.append(pb.Part(text=text))
    return found


def _answer(index: int, message: AssistantMessage) -> pb.Artifact:
    return pb.Artifact(
        artifact_id=f"answer-{index}", name="answer", parts=[pb.Part(text=text_of(message.content))]
    )


def _value(data: Any) -> struct_pb2.Value:
    value = struct_pb2.Value()
    json_format.ParseDict(data, value)
    return value


def _decision(message: pb.Message) -> dict[str, Any] | None:
    """The decision a message's data part gives (``{"approved": bool, ...}``), if any."""
    for part in message.parts:
        if part.HasField("data"):
            data = json_format.MessageToDict(part.data)
            if isinstance(data, dict) and isinstance(data.get("approved"), bool):
                return data
    return None


@asynccontextmanager
async def _translated() -> AsyncIterator[None]:
    """The session's refusals in the protocol's errors."""
    try:
        yield
    except SessionNotFoundError as error:
        raise TaskNotFoundError(message=str(error)) from None
    except HttpError as error:
        raise InvalidParamsError(message=error.error) from None
    except (
        SessionClosedError,
        MessageRefusedError,
        DecisionRefusedError,
        UnknownApprovalError,
    ) as error:
        raise InvalidParamsError(message=str(error)) from None


__all__ = ["A2aDoor", "a2a_routes", "agent_card"]


def _tool_names(spec: AgentSpec) -> list[str]:
    """The skills a card lists: the spec's own tools and the toolsets it names."""
    return [t.name for t in spec.tools] + [f"{s.kind}:{s.name}" for s in spec.toolsets]
