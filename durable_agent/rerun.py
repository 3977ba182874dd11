"""Rerun a recorded conversation against today's agent code: the same user messages,
sent in turn to a new session of ``spec`` whose model gives the recorded replies
wherever the request is unchanged (``RecordedReplies``), on a worker of its own with
the tools of today's ``registry``. The report says where the new run departs.

This is how an agent change is tested in CI: record sessions once, rerun them on
every change, and fail where they depart (``durable-agent replay``).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client

from durable_agent.branches import BranchDiff, diff_branches, message_line
from durable_agent.capabilities import Capabilities
from durable_agent.client import AgentClient
from durable_agent.endpoint import ProviderEndpoint
from durable_agent.messages import AssistantMessage, Message, UserMessage
from durable_agent.recorded_replies import Departure, Fallback, RecordedReplies
from durable_agent.spec import AgentSpec
from durable_agent.testing.scripted_provider import ScriptedProvider
from durable_agent.tools import ToolRegistry
from durable_agent.worker import build_worker

#: The endpoint name the rerun's worker registers for the recorded replies.
RECORDED = "recorded"


@dataclass
class RerunReport:
    session_id: str
    diff: BranchDiff
    """The recorded array (left) against the new one (right), from where they part."""
    replayed: int
    """Model requests answered from the recording."""
    fresh: int
    """Model requests the recording did not hold (the fallback's, or refused)."""
    departures: list[Departure]
    repeated: int = 0
    """Requests made again after a lost worker: answered as before, not counted."""

    @property
    def same(self) -> bool:
        return not self.diff.left and not self.diff.right and not self.departures

    def changed_calls(self) -> list[tuple[int, str, dict[str, Any], dict[str, Any]]]:
        """Tool calls at the same place with other arguments: (index, tool, recorded,
        now)."""
        found = []
        for offset, (old, new) in enumerate(zip(self.diff.left, self.diff.right, strict=False)):
            if isinstance(old, AssistantMessage) and isinstance(new, AssistantMessage):
                for a, b in zip(old.tool_calls or [], new.tool_calls or [], strict=False):
                    was, now = json.loads(a.function.arguments), json.loads(b.function.arguments)
                    if a.function.name == b.function.name and was != now:
                        found.append((self.diff.common + offset, a.function.name, was, now))
        return found

    def summary(self) -> str:
        if self.same:
            return f"same ({self.replayed} replies from the recording)"
        at = self.diff.common
        old = self.diff.left[0] if self.diff.left else None
        new = self.diff.right[0] if self.diff.right else None
        return (f"departs at message {at}: recorded {_short(old)}, now {_short(new)} "
                f"({self.replayed} replies from the recording, {self.fresh} not)")  # fmt: skip


async def rerun(
    client: Client,
    recorded: Sequence[Message],
    spec: AgentSpec,
    *,
    registry: ToolRegistry | None = None,
    capabilities: Capabilities | None = None,
    fallback: Fallback | None = None,
    live: bool = False,
    timeout: float = 120,
) -> RerunReport:
    """Send the recording's user messages, in turn, to a new session of ``spec`` (its
    model answered from the recording), approving what it asks, and compare. Where
    the run departs, ``fallback`` answers (a scripted model); with ``live``, the
    spec's own model does (its endpoint must be one ``capabilities`` registers)."""
    if live and fallback is not None:
        raise ValueError("rerun: give a fallback or live, not both")
    replies = RecordedReplies(recorded, fallback, departed_status=503 if live else 400)
    users = [m for m in recorded if isinstance(m, UserMessage)]
    if not users:
        raise ValueError("the recording has no user message to send")
    queue = f"rerun-{uuid.uuid4().hex[:10]}"
    with ScriptedProvider(responder=replies) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        owned = capabilities or Capabilities()
        owned = dataclasses.replace(owned, models={**owned.models, RECORDED: endpoint})
        ahead = [spec.model.model_copy(update={"fallbacks": []})] if live else []
        model = spec.model.model_copy(update={"endpoint": RECORDED, "fallbacks": ahead,
                                              "max_attempts": 1})  # fmt: skip
        session = spec.session.model_copy(update={"end_after_reply": False})
        ours = spec.model_copy(update={"model": model, "session": session})
        async with build_worker(client, task_queue=queue, registry=registry,
                                capabilities=owned, preload_tokenizers=False):  # fmt: skip
            agents = AgentClient(client, task_queue=queue)
            session_id = await agents.start(ours, users[0])
            await _answered(agents, session_id, 0, timeout)
            for user in users[1:]:
                before = await agents.send(session_id, user)
                await _answered(agents, session_id, before, timeout)
            now = await agents.messages(session_id)
            await agents.end(session_id, reason="rerun over")
    return RerunReport(session_id, diff_branches(recorded, now), replies.replayed,
                       replies.fresh, replies.departures, replies.repeated)  # fmt: skip


async def _answered(agents: AgentClient, session_id: str, after: int, timeout: float) -> None:
    """Wait for the reply, approving whatever the session asks on the way."""
    answered: set[str] = set()
    while True:
        outcome = await agents.wait(session_id, after=after, answered=answered, timeout=timeout)
        if outcome.kind != "approval":
            return
        for pending in outcome.pending:
            await agents.approve(session_id, pending.approval_id, by="rerun")
            answered.add(pending.approval_id)


def _short(message: Message | None) -> str:
    return "nothing" if message is None else message_line(message, 80)
