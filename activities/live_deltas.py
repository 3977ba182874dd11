"""The model call's text and reasoning as they stream, into the session's event log.

Deltas are coalesced: the first batch goes ``first_after`` the first text, later ones
in one event per ``interval``, each batch one signal (``WorkflowStreamClient``,
deduplicated by publisher and sequence). A reply streamed whole before its first batch
was due sends none: its text reaches readers with the reply's own event (the entry points make
a delta of it, ``gateway/unstreamed.py``), which spares a short call its signal and
the workflow task the signal wakes. Nothing is made before the first text: a reply of
tool calls alone (most of an agent's calls) costs no publisher, no task and no timer.
A later attempt of the same activity first says the attempt restarted, so a reader drops
what the lost one showed. Publishing never fails the model call: a log that cannot be
reached is given up on, with a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import structlog
from temporalio import activity
from temporalio.contrib.workflow_streams import WorkflowStreamClient

from durable_agent._contracts.events import (
    EVENTS_TOPIC,
    AttemptRestarted,
    ReasoningDelta,
    TextDelta,
)

log = structlog.get_logger("durable_agent.live")

#: Longest a delta waits for the next batch (the first waits ``FIRST_DELTA_AFTER_SECONDS``):
#: 80 ms keeps a reader under 150 ms (p50) and a streamed answer under a quarter more
#: history.
DELTA_INTERVAL_SECONDS = 0.08
#: How long the first text waits for more before it is sent: a reply streamed whole in
#: that time (a short answer, a cached one) sends no signal at all. Well under what a
#: person notices, and under what a real provider takes between its first tokens.
FIRST_DELTA_AFTER_SECONDS = 0.05
#: Longest the end of a call waits for its last batch to be taken.
FINAL_FLUSH_SECONDS = 5.0


class LiveDeltas:
    def __init__(
        self,
        turn: int,
        interval: float = DELTA_INTERVAL_SECONDS,
        first_after: float | None = None,
    ) -> None:
        self._turn = turn
        self._interval = interval
        self._first_after = FIRST_DELTA_AFTER_SECONDS if first_after is None else first_after
        self._sent = False
        """Whether a batch of deltas went out (else the end of the call sends none)."""
        self._live = False
        """Whether the call publishes (opened, and its log not given up on)."""
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._wake = asyncio.Event()
        self._client: WorkflowStreamClient | None = None
        self._sender: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Start publishing (the call's setup asks for live deltas); the publisher is
        made when the first batch is due, or now to say a lost attempt restarted."""
        self._live = True
        attempt = activity.info().attempt
        if attempt > 1:
            reason = "the call started over on another attempt (its worker was lost)"
            self._publish(AttemptRestarted(turn=self._turn, attempt=attempt, reason=reason))
            await self._flush()

    def text(self, text: str) -> None:
        if self._live:
            self._text.append(text)
            self._woken()

    def reasoning(self, text: str) -> None:
        if self._live:
            self._reasoning.append(text)
            self._woken()

    def _woken(self) -> None:
        """The first text starts the sender (in the activity's context, which the
        publisher is made from); later ones wake it."""
        self._wake.set()
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send_batches())

    async def close(self) -> None:
        """Send what is left (the reply's completion comes after it), then stop; nothing
        when no batch went out yet: the reply carries its whole text."""
        if self._sender is None:
            return
        self._sender.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._sender
        self._sender = None
        if not self._sent:
            return
        self._take()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FINAL_FLUSH_SECONDS):
                await self._flush()

    async def _send_batches(self) -> None:
        await asyncio.sleep(self._first_after)  # a short reply ends before this
        while self._live:
            await self._wake.wait()
            self._wake.clear()
            self._sent = True
            self._take()
            await self._flush()
            await asyncio.sleep(self._interval)

    def _take(self) -> None:
        if self._reasoning:
            self._publish(ReasoningDelta(turn=self._turn, text="".join(self._reasoning)))
            self._reasoning.clear()
        if self._text:
            self._publish(TextDelta(turn=self._turn, text="".join(self._text)))
            self._text.clear()

    def _publish(self, event: Any) -> None:
        if self._live:
            if self._client is None:
                self._client = WorkflowStreamClient.from_within_activity()
            data = event.model_dump(mode="json", exclude={"offset"})
            self._client.topic(EVENTS_TOPIC).publish(data)

    async def _flush(self) -> None:
        if self._client is None:
            return
        try:
            await self._client.flush()
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the session's log is away: the call goes on
            log.warning("live deltas given up", error=str(error), turn=self._turn)
            self._live = False
            self._client = None
