"""Feeding the worker's message log from the arrays its activities see.

A model call (and a store of the array's tail) holds a session's whole array; the
messages past what the log already holds go to it, in order, with their context. The
conversation turn and iteration of the next message are remembered per session, so a
call counts only what is new (the first call after a worker start counts its prefix
once).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import structlog
from temporalio import activity

from durable_agent._wire._messages import AssistantMessage, Message, UserMessage

from .message_sinks import MessageContext, MessageSink

log = structlog.get_logger("durable_agent.message_log")

#: Sessions whose position this worker remembers (older ones are counted again).
REMEMBERED_SESSIONS = 4096


class _Position:
    """The log's next index in a session, and the turn and iteration reached there."""

    def __init__(self) -> None:
        self.index = self.turn = self.iteration = 0

    def step(self, message: Message) -> None:
        if isinstance(message, UserMessage):
            self.turn, self.iteration = self.turn + 1, 0
        elif isinstance(message, AssistantMessage):
            self.iteration += 1
        self.index += 1


class MessageFeed:
    def __init__(self, sink: MessageSink) -> None:
        self.sink = sink
        self._positions: OrderedDict[str, _Position] = OrderedDict()

    async def offer(self, conversation: Sequence[Message]) -> None:
        """The session's whole array as this activity holds it. A sink that fails is
        reported and left where it was: the next call offers the rest again."""
        info = activity.info()
        session = info.workflow_id
        if session is None:
            return
        try:
            await self._feed(session, info.workflow_run_id, conversation)
        except Exception as error:  # the log is the program's: the session goes on
            self._positions.pop(session, None)
            log.warning("message log failed; offered again at the next call", error=str(error))

    async def _feed(
        self, session: str, run_id: str | None, conversation: Sequence[Message]
    ) -> None:
        position = self._positions.pop(session, None)
        if position is None or position.index > len(conversation):
            position = _Position()
            held = min(await self.sink.logged(session), len(conversation))
            for message in conversation[:held]:
                position.step(message)
        for message in conversation[position.index :]:
            position.step(message)  # counted first: a user message is its own turn's
            context = MessageContext(
                session=session,
                index=position.index - 1,
                turn=position.turn,
                iteration=position.iteration,
                agent=message.agent_name,
                run_id=run_id,
            )
            await self.sink.append(message, context)
        self._positions[session] = position
        while len(self._positions) > REMEMBERED_SESSIONS:
            self._positions.popitem(last=False)
