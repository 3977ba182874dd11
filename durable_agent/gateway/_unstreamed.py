"""A reply's text as one delta when it was not streamed, for the entry points that speak in
deltas (OpenAI chat and Responses streams, AG-UI).

The log streams a model's text as ``text_delta`` events, but not always: a session may
turn deltas off (``live_deltas``), and a reply hook keeps them back (readers would see
the text before the rewrite). The reply's text is then only in its own
``message_appended`` event. An entry point reading the log through ``whole_replies`` gets
that text (and reasoning) as one delta just before the message, so its client shows
the answer either way. The session's own event stream is left as the log has it.

A request that joins a reply under way reads its events through ``from_call_start``,
which leaves out the text of the model call it joined in the middle of.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from durable_agent._contracts._events import (
    AttemptRestarted,
    LiveEvent,
    MessageAppended,
    ModelStarted,
    ReasoningDelta,
    TextDelta,
)
from durable_agent._wire._messages import AssistantMessage


async def whole_replies(events: AsyncIterator[LiveEvent]) -> AsyncIterator[LiveEvent]:
    """``events``, with a delta made up for each part of a reply that was not streamed
    (at the offset before the reply's, so a reader resuming after it sees it again).
    Only the reply to a model call seen starting: the messages a run announces from an
    earlier one (a resumed or continued session) are not answers being given now."""
    turn, calling, text, reasoning = 0, False, False, False
    async for event in events:
        if isinstance(event, ModelStarted | AttemptRestarted):
            turn, calling, text, reasoning = event.turn, True, False, False
        elif isinstance(event, TextDelta):
            text = True
        elif isinstance(event, ReasoningDelta):
            reasoning = True
        elif isinstance(event, MessageAppended) and isinstance(event.message, AssistantMessage):
            reply, at = event.message, max(event.offset - 1, 0)
            if calling and reply.reasoning and not reasoning:
                yield ReasoningDelta(offset=at, turn=turn, text=reply.reasoning)
            if calling and reply.content and not text:
                yield TextDelta(offset=at, turn=turn, text=reply.content)
            calling = False
        yield event


async def from_call_start(events: AsyncIterator[LiveEvent]) -> AsyncIterator[LiveEvent]:
    """``events`` without the text and reasoning of a model call whose start they do not
    hold. A request that joins a session mid-answer (sent again after a decision or a
    disconnect) reads the log from where it is now: the call under way has streamed its
    beginning already, and its rest alone would show a client a reply that starts
    mid-sentence. The entry point gives the whole reply instead (the OpenAI endpoints
    as one piece of text, AG-UI in its closing snapshot)."""
    joined = False
    async for event in events:
        if isinstance(event, ModelStarted | AttemptRestarted):
            joined = True
        elif isinstance(event, TextDelta | ReasoningDelta) and not joined:
            continue
        yield event
