"""Versioned sessions, from the client: which build runs each session, which build is
current, making a build current, and moving pinned sessions to it. Mixed into
``AgentClient``.

The server keeps each run's version in its visibility record; the deployment's
routing says which build is current. Making a build current changes where new
sessions start; a running session goes there at its next turn boundary (see
``durable_agent.temporal._versions``).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio.api.deployment.v1 import WorkerDeploymentInfo
from temporalio.api.enums.v1 import RoutingConfigUpdateState
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from durable_agent._connection import (
    DEFAULT_DEPLOYMENT,
    DEPLOYMENT_FIELD,
    VERSION_FIELD,
    label,
    split_label,
)
from durable_agent._contracts.boundary import BUILD_CHANGED_SIGNAL, WORKFLOW_NAME
from durable_agent._spec.endpoints import LIMITER_WORKFLOW

from .handle import SessionHandle
from .results import Connection, SessionSummary, list_sessions

RUNNING = 'ExecutionStatus = "Running"'
IN_PROGRESS = RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_IN_PROGRESS
ReplyT = TypeVar("ReplyT")
#: Refusals that pass: the server was busy, not unwilling.
PASSING = (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.UNAVAILABLE)


class Versions:
    """``AgentClient.versions.list``: the builds sessions run on, and moving them."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.temporal: Client = connection.temporal

    async def list(self, *, limit: int = 10_000) -> dict[str, list[SessionSummary]]:
        """Running sessions by the build running them (``""``: workers without
        versioning), oldest build first as the server lists them."""
        grouped: dict[str, list[SessionSummary]] = {}
        for session in await list_sessions(self.temporal, limit=limit, where=RUNNING):
            grouped.setdefault(session.version or "", []).append(session)
        return grouped

    async def current(self, deployment: str = DEFAULT_DEPLOYMENT) -> str | None:
        """The build new sessions start on (``DEPLOYMENT:BUILD_ID``); ``None`` when the
        deployment has none current (or does not exist yet)."""
        found = await self._deployment(deployment)
        if found is None:
            return None
        current = found.routing_config.current_deployment_version
        return label(current.deployment_name, current.build_id) if current.build_id else None

    async def _deployment(self, deployment: str) -> WorkerDeploymentInfo | None:
        request = DescribeWorkerDeploymentRequest(
            namespace=self.temporal.namespace, deployment_name=deployment
        )
        service = self.temporal.workflow_service
        try:
            found = await _again(lambda: service.describe_worker_deployment(request))
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return found.worker_deployment_info

    async def make_current(self, version: str, *, by: str = "durable-agent") -> int:
        """Make a build current (``DEPLOYMENT:BUILD_ID`` or a build id of the default
        deployment): new sessions start on it, and running ones go to it at their next
        turn boundary if their agent upgrades on its own. Its workers must be polling.
        The sessions and limiters on the deployment's other builds are woken to look
        (idle ``auto`` sessions and limiters move at once); how many."""
        deployment, build_id = split_label(version)
        request = SetWorkerDeploymentCurrentVersionRequest(
            namespace=self.temporal.namespace,
            deployment_name=deployment,
            build_id=build_id,
            identity=by,
        )
        service = self.temporal.workflow_service
        try:  # (setting it twice is setting it once)
            await _again(lambda: service.set_worker_deployment_current_version(request))
        except RPCError as error:
            named = label(deployment, build_id)
            raise ValueError(f"cannot make {named} current: {error.message}") from None
        await self._routed(deployment)
        return await self._wake(deployment, label(deployment, build_id))

    async def _routed(self, deployment: str, patience: float = 30.0) -> None:
        """Wait until the server has passed the new routing to its task queues: a
        session woken before that would not yet see that another build is current."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + patience
        while loop.time() < deadline:
            found = await self._deployment(deployment)
            if found is None or found.routing_config_update_state != IN_PROGRESS:
                return
            await asyncio.sleep(0.2)

    async def _wake(self, deployment: str, current: str) -> int:
        """Signal the running sessions and limiters of ``deployment`` on other builds."""
        others = f'{DEPLOYMENT_FIELD} = "{deployment}" AND {VERSION_FIELD} != "{current}"'
        signals = {WORKFLOW_NAME: BUILD_CHANGED_SIGNAL, LIMITER_WORKFLOW: "release"}
        woken = 0
        for kind, signal in signals.items():
            query = f'WorkflowType = "{kind}" AND {RUNNING} AND {others}'
            async for found in self.temporal.list_workflows(query):
                with contextlib.suppress(RPCError):  # it ended meanwhile
                    await self.temporal.get_workflow_handle(found.id).signal(signal, [])
                    woken += 1
        return woken

    async def move(self, version: str) -> builtins.list[str]:
        """Send every running session on ``version`` to the current build at its next
        turn boundary; their ids (one session alone: ``SessionHandle.move_to_current``)."""
        deployment, build_id = split_label(version)
        where = f'{RUNNING} AND {VERSION_FIELD} = "{label(deployment, build_id)}"'
        running = await list_sessions(self.temporal, limit=10_000, where=where)
        moving = [s.session_id for s in running]
        for session_id in moving:
            await SessionHandle(self._connection, session_id).move_to_current()
        return moving


async def _again(call: Callable[[], Awaitable[ReplyT]]) -> ReplyT:
    """``call``, asked again a few times while the server says it was busy: it serves
    deployments from workflows of its own, and a loaded server cancels those reads and
    writes now and then."""
    pauses = [0.2, 0.5, 1.0]
    while True:
        try:
            return await call()
        except RPCError as error:
            if error.status not in PASSING or not pauses:
                raise
            await asyncio.sleep(pauses.pop(0))
