"""The CLI's output stream: session text (a model's, a tool's, a sender's) reaches the
terminal with its control and bidirectional characters shown as escapes, so it cannot
move the cursor, recolour, retitle or reorder what a person reads. Newlines and tabs
stay as they are; JSON output stays valid (an escape is a JSON escape)."""

from __future__ import annotations

import io
from typing import TextIO

from durable_agent._wire._visible_text import visible


class VisibleWriter(io.TextIOBase):
    def __init__(self, out: TextIO) -> None:
        self._out = out

    def write(self, text: str) -> int:
        self._out.write(visible(text, keep="\n\t"))
        return len(text)

    def control(self, sequence: str) -> None:
        """The CLI's own control sequence (a status line's rewrite), written as it is."""
        self._out.write(sequence)

    def flush(self) -> None:
        self._out.flush()

    def isatty(self) -> bool:
        return self._out.isatty()
