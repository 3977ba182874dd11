"""The message array with a content-hash chain over it.

``hash[i]`` names the first ``i`` messages exactly: ``hash[0]`` is fixed and
``hash[i] = sha256(hash[i-1] + canonical_json(message[i-1]))``. The workflow
computes it (pure, deterministic); workers keep transcripts by it, so a model
call can say "the prefix you hold as H, plus these new messages" instead of
carrying the whole array into history again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from durable_agent.messages import Message


def _digest(data: bytes) -> str:
    # 128 bits of SHA-256: collisions stay out of reach, and history stays lean.
    return hashlib.sha256(data).hexdigest()[:32]


EMPTY_HASH = _digest(b"durable-agent transcript v1")


def payload_bytes(message: Message) -> int:
    """What a message costs in a payload: the data converter's JSON (null fields too, not
    the canonical form), and a comma. (``model_dump_json`` in bytes, without decoding
    and encoding it again: a message of megabytes is sized in workflow code.)"""
    return len(message.__pydantic_serializer__.to_json(message)) + 1


def canonical_json(message: Message) -> str:
    """The one serialisation hashed and stored: sorted keys, no spaces, no nulls."""
    return json.dumps(
        message.model_dump(mode="json", exclude_none=True),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def chain_hash(previous: str, message_json: str) -> str:
    return _chained(previous, message_json.encode())


def _chained(previous: str, encoded: bytes) -> str:
    """``chain_hash`` over the message's encoded JSON, fed to the digest as it is
    (no joined copy of a message of megabytes)."""
    digest = hashlib.sha256(f"{previous}\n".encode())
    digest.update(encoded)
    return digest.hexdigest()[:32]


def content_hash(message: Message) -> str:
    """A message by its content alone (tool results stored by their activity)."""
    return json_digest(canonical_json(message))


def json_digest(message_json: str) -> str:
    """``content_hash`` of a message from its ``canonical_json``."""
    return _digest(message_json.encode())


def hash_messages(messages: Iterable[Message], start: str = EMPTY_HASH) -> str:
    current = start
    for message in messages:
        current = chain_hash(current, canonical_json(message))
    return current


class Transcript(Sequence[Message]):
    """An append-only message list that knows the chain hash and JSON size of every prefix.

    Both are worked out when first asked for, and only as far as asked: a run that adopts
    10,000 carried messages does no hashing in the task that adopts them, and a caller
    that wants the prefix of 2,000 pays for 2,000 (the workflow spreads the rest over
    the tasks that store the array in pieces). The values are the same either way."""

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._messages: list[Message] = list(messages)
        self._hashes: list[str] = [EMPTY_HASH]
        self._contents: list[str] = []
        self._sizes: list[int] = [0]
        self._ahead: dict[int, tuple[Message, bytes, int]] = {}
        """Messages encoded before they were appended, by ``id`` (the message is kept
        too: its id cannot be taken by another while the entry lives)."""

    @classmethod
    def adopt(cls, messages: list[Message]) -> Transcript:
        """A transcript over ``messages`` itself: what is appended lands in that very list
        (the session state's, so it is carried without a copy)."""
        transcript = cls()
        transcript._messages = messages
        return transcript

    def encode_ahead(self, message: Message) -> None:
        """Encode a message that is about to be appended (a tool result as it arrives):
        a batch of thousands is then encoded over the tasks its results came in, not
        all in the task that appends them. Values are the same either way."""
        encoded = canonical_json(message).encode()
        self._ahead[id(message)] = (message, encoded, payload_bytes(message))

    def _known(self, count: int) -> None:
        """Hashes and sizes of the first ``count`` messages, from where they stopped."""
        for message in self._messages[len(self._contents) : count]:
            ahead = self._ahead.pop(id(message), None)
            if ahead is not None and ahead[0] is message:
                _, encoded, size = ahead
            else:  # once, for both digests
                encoded, size = canonical_json(message).encode(), payload_bytes(message)
            self._hashes.append(_chained(self._hashes[-1], encoded))
            self._contents.append(_digest(encoded))
            self._sizes.append(self._sizes[-1] + size)
        if len(self._contents) == len(self._messages):
            self._ahead.clear()  # what was encoded and never appended (a copy went in)

    def append(self, message: Message) -> None:
        self._messages.append(message)

    def extend(self, messages: Iterable[Message]) -> None:
        self._messages.extend(messages)

    def hash_at(self, count: int) -> str:
        """The hash naming the first ``count`` messages."""
        self._known(count)
        return self._hashes[count]

    def content_hash_at(self, index: int) -> str:
        """``content_hash`` of message ``index``."""
        self._known(index + 1)
        return self._contents[index]

    @property
    def head(self) -> str:
        return self.hash_at(len(self._messages))

    def json_bytes(self, start: int = 0, end: int | None = None) -> int:
        """Size of messages ``[start:end]`` in a payload (as the data converter writes
        them, with a comma each)."""
        end = len(self._messages) if end is None else end
        self._known(end)
        return self._sizes[end] - self._sizes[start]

    def size_of(self, index: int) -> int:
        """``payload_bytes`` of message ``index``: the size already worked out when there
        is one (a message of megabytes is not encoded again), else worked out alone."""
        if index < len(self._contents):
            return self._sizes[index + 1] - self._sizes[index]
        ahead = self._ahead.get(id(self._messages[index]))
        if ahead is not None and ahead[0] is self._messages[index]:
            return ahead[2]
        return payload_bytes(self._messages[index])

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self._messages[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)
