"""Taking secret values out of text, in the forms they travel in.

A tool that echoes a token rarely echoes it as it is: it URL-quotes it into a link,
escapes it into JSON, or base64-encodes it into a Basic header. Each of those forms is
replaced too, so a value that reached a tool (or a provider's error body) does not
reach history, the store or a log in another encoding.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from urllib.parse import quote, quote_plus

#: Shorter values are replaced only as they are (their encodings are too common).
MIN_DISGUISED = 6
#: Shorter base64 fragments are not replaced (they would match unrelated text).
MIN_FRAGMENT = 8


def _base64_fragments(value: bytes) -> set[str]:
    """What ``value`` looks like inside any base64 text, at each of the three byte
    alignments it can start at (only the characters no neighbouring byte changes)."""
    found: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + value).decode()
        start = -(-offset * 4 // 3)  # characters the leading filler bytes touch
        end = (offset + len(value)) // 3 * 4  # complete groups only
        fragment = encoded[start:end]
        if len(fragment) >= MIN_FRAGMENT:
            found.add(fragment)
            found.add(fragment.replace("+", "-").replace("/", "_"))
    return found


def disguises(value: str) -> list[str]:
    """``value`` and the forms it commonly takes in text, longest first."""
    forms = {value}
    if len(value) >= MIN_DISGUISED:
        forms |= {quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1]}
        forms |= _base64_fragments(value.encode())
    return sorted((f for f in forms if f), key=len, reverse=True)


def redact(text: str, values: Mapping[str, str], marker: str = "{{{{secret:{name}}}}}") -> str:
    """``text`` with every form of each value put back as ``marker`` (longest first,
    so a value inside another is not half-replaced)."""
    pairs = [(form, name) for name, value in values.items() if value for form in disguises(value)]
    for form, name in sorted(pairs, key=lambda pair: len(pair[0]), reverse=True):
        text = text.replace(form, marker.format(name=name))
    return text
