"""Following a session by polling its queries: ``watch`` yields each change, ``wait``
stops at the first that needs the caller (an answer, an approval, the end). The live
event stream (``AgentClient.follow``) is finer-grained; this needs only queries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection

from durable_agent.core import AgentResult, Message, SessionStatus

from ._types import SessionChange, WaitOutcome


class SessionWatch:
    """Mixed into ``AgentClient``."""

    async def has_ended(self, session_id: str) -> bool:
        raise NotImplementedError

    async def status(self, session_id: str) -> SessionStatus:
        raise NotImplementedError

    async def messages(
        self, session_id: str, from_index: int = 0, *, limit: int | None = None
    ) -> list[Message]:
        raise NotImplementedError

    async def result_if_closed(self, session_id: str) -> AgentResult | None:
        raise NotImplementedError

    async def watch(
        self, session_id: str, *, after: int = 0, poll_seconds: float = 0.1
    ) -> AsyncIterator[SessionChange]:
        """Changes from message index ``after`` on, until the session ends, read by
        polling its queries (``wait`` uses it): messages, status, approvals asked, a
        reply, the end. ``follow`` is the live, finer-grained stream."""
        cursor = replied_at = after
        announced: set[str] = set()
        last: SessionStatus | None = None
        delay = poll_seconds
        while True:
            closed = await self.has_ended(session_id)
            status = None if closed else await self.status(session_id)
            fresh = await self.messages(session_id, cursor)
            for message in fresh:
                yield SessionChange("message", message=message, index=cursor)
                cursor += 1
            if closed or status is None:
                yield SessionChange("ended", result=await self.result_if_closed(session_id))
                return
            changed = bool(fresh) or status != last
            if status != last:
                last = status
                yield SessionChange("status", status=status)
            for pending in status.pending_approvals:
                if pending.approval_id not in announced:
                    announced.add(pending.approval_id)
                    yield SessionChange("approval", status=status, pending=pending)
            idle = status.phase == "idle" and status.queued_messages == 0
            if idle and status.message_count == cursor and cursor > replied_at:
                replied_at = cursor
                yield SessionChange("reply", status=status)
            delay = poll_seconds if changed else min(delay * 1.5, 1.0)
            await asyncio.sleep(delay)

    async def wait(
        self,
        session_id: str,
        *,
        after: int = 0,
        answered: Collection[str] = (),
        timeout: float | None = None,
        poll_seconds: float = 0.1,
    ) -> WaitOutcome:
        """Wait until the session has answered beyond message index ``after``, asks for an
        approval (other than the ids in ``answered``, decisions already sent), or has
        ended (``watch``, stopped at the first of those)."""
        messages: list[Message] = []
        try:
            async with asyncio.timeout(timeout):
                async for event in self.watch(session_id, after=after, poll_seconds=poll_seconds):
                    if event.kind == "message" and event.message is not None:
                        messages.append(event.message)
                    elif event.kind == "approval" and event.status is not None:
                        if event.pending and event.pending.approval_id in answered:
                            continue
                        pending = [
                            p
                            for p in event.status.pending_approvals
                            if p.approval_id not in answered
                        ]
                        return WaitOutcome("approval", messages, event.status, pending)
                    elif event.kind == "reply":
                        return WaitOutcome("reply", messages, event.status, [])
                    elif event.kind == "ended":
                        return WaitOutcome("ended", messages, None, [], event.result)
        except TimeoutError:
            raise TimeoutError(
                f"session {session_id!r} did not answer within {timeout} s"
            ) from None
        raise AssertionError("watch ends with an 'ended' event")
