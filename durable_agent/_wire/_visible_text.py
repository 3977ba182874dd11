"""Text a person reads, made safe to show: control and bidirectional-format characters
written as ``\\uXXXX`` escapes.

A model, a tool or a session's starter chooses the text an approver reads and a
terminal prints. A terminal escape can repaint the screen, and a right-to-left
override can make ``amount=1000`` read as something else; shown as escapes, both are
visible for what they are. Pure.
"""

from __future__ import annotations

import re

#: C0 and C1 controls, and the format characters that reorder or hide text (bidi
#: embeddings, overrides and isolates, zero-width characters, the Arabic letter mark,
#: the byte order mark, interlinear annotations, tag characters).
HIDDEN = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def visible(text: str, keep: str = "") -> str:
    """``text`` with every hidden character but those in ``keep`` as an escape."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        code = ord(char)
        return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"

    return HIDDEN.sub(escape, text)
