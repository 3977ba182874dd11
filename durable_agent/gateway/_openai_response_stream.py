"""A Responses request answered as a stream (``stream: true``): OpenAI's event sequence,
as the ``openai`` SDK's stream reader and its ``responses.stream`` helper expect it.

Each model call that writes text is a ``message`` output item, streamed as
``response.output_text.delta`` events; calls waiting for a person are
``mcp_approval_request`` items; ``response.completed`` carries the whole response
(``response.failed`` when the session ended without an answer).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from sse_starlette import ServerSentEvent

from durable_agent._contracts._events import ModelStarted, TextDelta

from ._openai_common import Reply


class _Stream:
    """The events so far: their numbers, the items done, the message being written."""

    def __init__(self, ident: str) -> None:
        self.ident = ident
        self.number = 0
        self.items: list[dict[str, Any]] = []
        self.text: str | None = None

    def event(self, kind: str, **fields: Any) -> ServerSentEvent:
        self.number += 1
        said = {"type": kind, "sequence_number": self.number, **fields}
        return ServerSentEvent(data=json.dumps(said, ensure_ascii=False), event=kind, sep="\n")

    @property
    def _where(self) -> dict[str, Any]:
        return {"item_id": self._item_id, "output_index": len(self.items), "content_index": 0}

    @property
    def _item_id(self) -> str:
        return f"msg_{len(self.items)}_{self.ident.removeprefix('resp_')}"

    def open_message(self) -> list[ServerSentEvent]:
        self.text = ""
        item = {
            "id": self._item_id,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        part = {"type": "output_text", "text": "", "annotations": []}
        return [
            self.event("response.output_item.added", output_index=len(self.items), item=item),
            self.event("response.content_part.added", **self._where, part=part),
        ]

    def delta(self, text: str) -> ServerSentEvent:
        self.text = (self.text or "") + text
        return self.event("response.output_text.delta", **self._where, delta=text, logprobs=[])

    def close_message(self) -> list[ServerSentEvent]:
        if self.text is None:
            return []
        part = {"type": "output_text", "text": self.text, "annotations": []}
        item = {
            "id": self._item_id,
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [part],
        }
        done = [
            self.event("response.output_text.done", **self._where, text=self.text, logprobs=[]),
            self.event("response.content_part.done", **self._where, part=part),
            self.event("response.output_item.done", output_index=len(self.items), item=item),
        ]
        self.items.append(item)
        self.text = None
        return done

    def add_item(self, item: dict[str, Any]) -> list[ServerSentEvent]:
        at = len(self.items)
        self.items.append(item)
        return [
            self.event("response.output_item.added", output_index=at, item=item),
            self.event("response.output_item.done", output_index=at, item=item),
        ]


async def response_events(
    ident: str,
    steps: AsyncIterator[Any],
    whole: Callable[[Reply, list[dict[str, Any]], str], dict[str, Any]],
) -> AsyncIterator[ServerSentEvent]:
    """The stream of one response. ``whole(reply, output, status)``: the response
    object, with these output items and this status."""
    stream = _Stream(ident)
    started = whole(Reply(), [], "in_progress")
    yield stream.event("response.created", response=started)
    yield stream.event("response.in_progress", response=started)
    reply = Reply()
    async for step in steps:
        if isinstance(step, Reply):
            reply = step
        elif isinstance(step, ModelStarted):
            for event in stream.close_message():
                yield event
        elif isinstance(step, TextDelta):
            if stream.text is None:
                for event in stream.open_message():
                    yield event
            yield stream.delta(step.text)
    for event in stream.close_message():
        yield event
    for pending in reply.pending:
        item = {
            "type": "mcp_approval_request",
            "id": pending.approval_id,
            "name": pending.tool_name,
            "arguments": pending.arguments,
            "server_label": "durable-agent",
        }
        for event in stream.add_item(item):
            yield event
    if reply.ended is not None:
        failed = whole(reply, stream.items, "failed")
        failed["error"] = {"code": "session_ended", "message": f"the session ended: {reply.ended}"}
        yield stream.event("response.failed", response=failed)
        return
    yield stream.event("response.completed", response=whole(reply, stream.items, "completed"))
