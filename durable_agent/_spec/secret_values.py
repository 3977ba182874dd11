"""Secrets that never enter history: ``{{secret:NAME}}`` references, resolved only inside
the tool activity.

A spec lists the secret names its session may use (``secrets``); a tool's arguments and
the ``context`` values bound to it may hold references. The worker resolves them from
its environment (or a provider you give ``build_worker``) just before the tool runs, and
takes every resolved value out of the tool's result and error text again, so the model,
the workflow history, the transcript store and the logs only ever see the reference.

The second half takes secret values out of text in each form they travel in (as they
are, URL-quoted, JSON-escaped, base64-encoded): ``redact``.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from durable_agent._errors import DurableAgentError

# Taking secret values out of text, in the forms they travel in.
#
# A tool that echoes a token rarely echoes it as it is: it URL-quotes it into a link,
# escapes it into JSON, or base64-encodes it into a Basic header. Each of those forms is
# replaced too, so a value that reached a tool (or a provider's error body) does not
# reach history, the store or a log in another encoding.

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


#: ``{{secret:NAME}}``; names as environment variables spell them.
SECRET_REFERENCE = re.compile(r"\{\{secret:([A-Za-z_][A-Za-z0-9_]*)\}\}")
SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

SecretProvider = Callable[[str], str | None]
"""A secret's value by name, or ``None`` when there is none."""

SecretLookup = Callable[[str, str | None], str]
"""Where a secret is read from (its provider name) for a parameter of the call's tool;
raises when the worker does not give that secret to it (``Capabilities``)."""


def environment_secrets(name: str) -> str | None:
    """The default provider: the worker's environment variables."""
    return os.environ.get(name)


class SecretError(DurableAgentError, ValueError):
    """A reference the session may not use, or one the worker cannot resolve."""


def references(value: Any) -> set[str]:
    """Every secret name referenced anywhere in a JSON value."""
    if isinstance(value, str):
        return set(SECRET_REFERENCE.findall(value))
    if isinstance(value, dict):
        return set().union(*(references(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(references(v) for v in value)) if value else set()
    return set()


def _same_name(name: str, parameter: str | None) -> str:
    return name


class SecretResolver:
    """Resolves references for one call and remembers the values, to redact them.

    A reference resolves only when the session lists the secret (``spec.secrets``) and
    the worker gives it to this tool's parameter (``lookup``): the session's starter
    chooses among what the worker's owner granted, never beyond it."""

    def __init__(
        self,
        allowed: Collection[str],
        provider: SecretProvider,
        lookup: SecretLookup = _same_name,
    ) -> None:
        self._allowed = set(allowed)
        self._provider = provider
        self._lookup = lookup
        self.used: dict[str, str] = {}

    def resolve_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """A call's arguments, each top-level one resolved as that parameter's."""
        return {name: self.resolve(value, name) for name, value in arguments.items()}

    def resolve(self, value: Any, parameter: str | None = None) -> Any:
        if isinstance(value, str):
            return SECRET_REFERENCE.sub(lambda m: self._value(m.group(1), parameter), value)
        if isinstance(value, dict):
            return {k: self.resolve(v, parameter) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(v, parameter) for v in value]
        return value

    def _value(self, name: str, parameter: str | None) -> str:
        if name not in self._allowed:
            raise SecretError(
                f"secret {name!r} is not among the session's secrets "
                f"(spec.secrets: {', '.join(sorted(self._allowed)) or 'none'})"
            )
        try:
            source = self._lookup(name, parameter)
        except (LookupError, PermissionError) as error:
            raise SecretError(str(error)) from None
        found = self._provider(source)
        if found is None:
            raise SecretError(f"secret {name!r} is not set on this worker")
        self.used[name] = found
        return found

    def redact(self, text: str) -> str:
        """``text`` with every value this call resolved put back as its reference, in
        each form it travels in (URL-quoted, JSON-escaped, base64)."""
        return redact(text, self.used)
