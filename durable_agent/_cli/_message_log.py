"""The message log (``JSONLMessageLog``): one message a line with its
context: the session, the conversation turn (user messages so far), the iteration
within it (model calls since that message), the agent, the message's index, and the
workflow run it landed in when that is known (lines followed live).

Lines come from the session's own array (the ``messages`` query and the live
``message_appended`` events, both read from workflow state), so the log is complete and
a retried model or tool call never writes a line twice."""

from __future__ import annotations

import json
from typing import Any

from durable_agent._wire._messages import AssistantMessage, Message, UserMessage


class MessageLog:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.count = 0
        self._turn = 0
        self._iteration = 0

    def line(self, message: Message, run: int | None = None) -> str:
        """The next message's line (messages must come in array order)."""
        if isinstance(message, UserMessage):
            self._turn += 1
            self._iteration = 0
        elif isinstance(message, AssistantMessage):
            self._iteration += 1
        context: dict[str, Any] = {
            "session": self.session_id,
            "turn": self._turn,
            "iteration": self._iteration,
            "index": self.count,
        }
        if message.agent_name:
            context["agent"] = message.agent_name
        if run is not None:
            context["run"] = run
        context["message"] = message.model_dump(mode="json", exclude_none=True)
        self.count += 1
        return json.dumps(context, ensure_ascii=False)
