"""Branching conversations from the client: ``fork`` starts a session from the first
messages of another, ``diff`` shows where two branches part. Mixed into
``AgentClient``."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import Client
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from durable_agent.core import (
    WORKFLOW_NAME,
    AgentInput,
    AgentSpec,
    BranchDiff,
    Fork,
    Message,
    UserMessage,
    diff_branches,
    fork_problem,
)
from durable_agent.payloads import check_fits

from ._types import SessionExistsError, parse_spec


class SessionBranches:
    """Mixed into ``AgentClient``."""

    temporal: Client
    task_queue: str

    async def messages(
        self, session_id: str, from_index: int = 0, *, limit: int | None = None
    ) -> list[Message]:
        raise NotImplementedError

    async def fork(
        self,
        session_id: str,
        at: int,
        spec: AgentSpec | dict[str, Any] | str,
        message: str | UserMessage | None = None,
        *,
        new_session_id: str | None = None,
        owner: str | None = None,
    ) -> str:
        """Start a session whose conversation is the first ``at`` messages of
        ``session_id``'s, under ``spec`` (its instructions replace the branch's first
        system message), then ``message`` if given. The worker reads the messages from
        that session and stores them: nothing is copied into history and no model call
        is made again. With no message, a branch that ends with a user or tool message
        asks the model at once; one that ends with an answer waits. The parent is not
        touched. ``ValueError`` when ``at`` is outside the array or splits a tool batch;
        ``owner``: the parent's unless given. The branch's memo says where it came
        from (``forked_from``, ``forked_at``), and ``sessions`` lists it so."""
        parent = await self.messages(session_id, 0, limit=at)
        problem = fork_problem(parent, at)
        if problem is not None:
            raise ValueError(problem)
        described = await self.temporal.get_workflow_handle(session_id).describe()
        owner = owner or await described.memo_value("owner", "", type_hint=str) or None
        request = AgentInput(
            spec=parse_spec(spec),
            message=message,
            fork=Fork(session_id=session_id, run_id=described.run_id, at=at),
        )
        check_fits(self.temporal.data_converter, request, "the branch's start")
        new_session_id = new_session_id or f"session-{uuid.uuid4().hex[:12]}"
        memo: dict[str, Any] = {"forked_from": session_id, "forked_at": str(at)}
        if owner:
            memo["owner"] = owner
        try:
            await self.temporal.start_workflow(
                WORKFLOW_NAME, request, id=new_session_id, task_queue=self.task_queue,
                memo=memo, id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )  # fmt: skip
        except WorkflowAlreadyStartedError:
            raise SessionExistsError(new_session_id) from None
        return new_session_id

    async def diff(self, left: str, right: str) -> BranchDiff:
        """Where two sessions' conversations part (a fork and its parent, or two forks):
        how many messages they share, and what each has after them."""
        return diff_branches(await self.messages(left), await self.messages(right))
