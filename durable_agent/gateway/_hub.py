"""One reader of a session's event log per gateway process, shared by every browser
that follows the session there: 100 open tabs cost the server one poll query per
interval, not 100. Transient (a cache, not state): it goes when its last reader does."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
from collections.abc import AsyncIterator, Callable

from durable_agent._client._client import AgentClient
from durable_agent._contracts._events import LiveEvent

#: Events a hub keeps for readers that join late (older ones read the log themselves).
HUB_EVENTS = 5000


class SessionHub:
    def __init__(self, agents: AgentClient, session_id: str, after: int) -> None:
        self.first = after
        self.readers = 0
        self._events: list[LiveEvent] = []
        self._offsets: list[int] = []
        self._changed = asyncio.Condition()
        self._done = False
        self.error: Exception | None = None
        self._task = asyncio.create_task(self._pump(agents, session_id))

    async def _pump(self, agents: AgentClient, session_id: str) -> None:
        try:
            async for event in agents.session(session_id).follow(after=self.first):
                self._events.append(event)
                self._offsets.append(event.offset)
                if len(self._events) > HUB_EVENTS:
                    drop = len(self._events) - HUB_EVENTS
                    self.first = self._offsets[drop - 1]
                    del self._events[:drop], self._offsets[:drop]
                async with self._changed:
                    self._changed.notify_all()
        except Exception as error:  # readers see it, and the hub is rebuilt next time
            self.error = error
        finally:
            self._done = True
            async with self._changed:
                self._changed.notify_all()

    def covers(self, after: int) -> bool:
        return after >= self.first and self.error is None

    async def read(self, after: int) -> AsyncIterator[LiveEvent]:
        while True:
            start = bisect.bisect_right(self._offsets, after)
            fresh = self._events[start:]
            for event in fresh:
                yield event
                after = event.offset
            if self.error is not None:
                raise self.error
            if self._done and not fresh:
                return
            async with self._changed:
                await self._changed.wait_for(self._newer_than(after))

    def _newer_than(self, seen: int) -> Callable[[], bool]:
        return lambda: self._done or bool(self._offsets and self._offsets[-1] > seen)

    async def close(self) -> None:
        """Stop reading the log; readers get what they have not yet, then their end."""
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


class Hubs:
    """The gateway's hubs by session id."""

    def __init__(self, agents: AgentClient) -> None:
        self._agents = agents
        self._hubs: dict[str, SessionHub] = {}
        self._stopped = False

    async def stop(self) -> None:
        """End every reader's stream (the gateway is stopping): each response then
        completes, so the server can close its connections at once instead of cutting
        them; a reader resumes from its last offset, on this gateway or another."""
        self._stopped = True
        hubs = list(self._hubs.values())
        self._hubs.clear()
        for hub in hubs:
            await hub.close()

    async def follow(self, session_id: str, after: int) -> AsyncIterator[LiveEvent]:
        if self._stopped:
            return
        shared = self._hubs.get(session_id)
        if shared is not None and shared.covers(after):
            hub = shared
        else:  # the first reader here, or one the shared hub cannot serve: its own hub
            hub = SessionHub(self._agents, session_id, after)
            if shared is None:
                self._hubs[session_id] = hub
        hub.readers += 1
        try:
            async for event in hub.read(after):
                yield event
        finally:
            hub.readers -= 1
            if hub.readers == 0:
                if self._hubs.get(session_id) is hub:
                    del self._hubs[session_id]
                await hub.close()
