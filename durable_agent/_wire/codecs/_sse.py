"""Server-sent events, parsed incrementally from bytes split anywhere.

Follows the WHATWG event-stream rules: ``\\r\\n``, ``\\r`` or ``\\n`` line ends,
``data`` lines joined with ``\\n``, comments and unknown fields ignored, an
event dispatched on a blank line. Splits inside a line or inside a UTF-8
character are carried to the next chunk.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None


#: What ends a line in an event stream: CRLF, CR or LF, and nothing else.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


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
        for brk in _LINE_BREAK.finditer(text):  # scanned in C, not a character at a time
            event = self._line(text[start : brk.start()])
            if event is not None:
                events.append(event)
            start = brk.end()
        self._pending_cr = text.endswith("\r") and start == len(text)
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
