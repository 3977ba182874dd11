"""Server-sent events, parsed incrementally from bytes split anywhere.

Follows the WHATWG event-stream rules: ``\\r\\n``, ``\\r`` or ``\\n`` line ends,
``data`` lines joined with ``\\n``, comments and unknown fields ignored, an
event dispatched on a blank line. Splits inside a line or inside a UTF-8
character are carried to the next chunk.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None


class SSEDecoder:
    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._pending_cr = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Events completed by this chunk."""
        return self._lines(self._text.decode(chunk))

    def close(self) -> list[SSEEvent]:
        """Flush at end of stream. A trailing event without its blank line is dropped,
        as the standard says: it was never dispatched."""
        events = self._lines(self._text.decode(b"", final=True))
        if self._buffer:
            self._line(self._buffer)
            self._buffer = ""
        return events

    def _lines(self, text: str) -> list[SSEEvent]:
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the \n of a \r\n split across chunks
        self._pending_cr = False
        text = self._buffer + text
        events: list[SSEEvent] = []
        start = 0
        i = 0
        n = len(text)
        while i < n:
            ch = text[i]
            if ch == "\r" or ch == "\n":
                event = self._line(text[start:i])
                if event is not None:
                    events.append(event)
                if ch == "\r":
                    if i + 1 < n and text[i + 1] == "\n":
                        i += 1
                    elif i + 1 == n:
                        self._pending_cr = True
                start = i + 1
            i += 1
        self._buffer = text[start:]
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = SSEEvent(data="\n".join(self._data), event=self._event or "message", id=self._id)
        self._data = []
        self._event = ""
        return event


def parse_sse(chunks: Iterable[bytes]) -> list[SSEEvent]:
    """All events of a whole byte stream given as chunks."""
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.close())
    return events
