"""The message array with a content-hash chain over it.

``hash[i]`` names the first ``i`` messages exactly: ``hash[0]`` is fixed (the chain's
root) and each link hashes the one before with the next message. The workflow computes
it (pure, deterministic); workers keep transcripts by it, so a model call can say "the
prefix you hold as H, plus these new messages" instead of carrying the whole array into
history again.

Two chains, told apart by their root (a hash names its chain: see ``hash_version``):

- the first, ``hash[i] = sha256(hash[i-1] + canonical_json(message[i-1]))``, which
  sessions opened before the second came keep for good;
- the second, ``hash[i] = "v" + sha256(hash[i-1] + content_hash(message[i-1]))``: a
  link needs only the message's content hash, which the worker that made or read the
  message works out. A 20 MB tool result then joins the chain in the workflow without
  being encoded or hashed there at all.

The branches of a conversation are read off the array here too (pure): where a fork may
cut it, the array a fork starts from, and where two branches part.
"""

from __future__ import annotations

import hashlib
import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar, overload

from durable_agent._wire.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    _Stored,
)


def _digest(data: bytes) -> str:
    # 128 bits of SHA-256: collisions stay out of reach, and history stays lean.
    return hashlib.sha256(data).hexdigest()[:32]


EMPTY_HASH = _digest(b"durable-agent transcript v1")
#: The version-2 hash chain's root; its hashes start with a letter no hex digest has.
ROOT_V2 = "v" + hashlib.sha256(b"durable-agent transcript v2").hexdigest()[:31]
ROOTS = frozenset({EMPTY_HASH, ROOT_V2})


def hash_version(head: str) -> int:
    """Which chain a hash is a link of (1 or 2)."""
    return 2 if head.startswith("v") else 1


def root_of(chain: int | None) -> str:
    """The root of chain ``chain`` (``None``: the first)."""
    return ROOT_V2 if chain == 2 else EMPTY_HASH


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
    """The link after ``previous`` for the message encoded as ``message_json``, in
    ``previous``'s chain."""
    encoded = message_json.encode()
    if hash_version(previous) == 2:
        return _linked(previous, _digest(encoded))
    return _chained(previous, encoded)


def _linked(previous: str, content: str) -> str:
    """A link of the version-2 hash chain: the previous link and the message's content hash."""
    return "v" + hashlib.sha256(f"{previous}\n{content}".encode()).hexdigest()[:31]


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


#: A message encoded before it was appended: itself, its canonical JSON (``None`` in the
#: version-2 hash chain when its digest came with it), its ``payload_bytes``, its content hash.
_Ahead = tuple[Message, bytes | None, int, str | None]


def message_id(index: int) -> str:
    """The stable id a session gives the message at ``index`` of its array: the array
    only grows (compaction and trimming leave messages where they are), so a message's
    id never changes, and no two messages of one session share one (an id a sender gave
    in this form is kept apart: ``kept_apart``). A reader joining several sessions'
    arrays prefixes it with the session id."""
    return f"m{index}"


_OWN_FORM = re.compile(r"m[0-9]+")

_M = TypeVar("_M", bound=_Stored)


def kept_apart(message: _M) -> _M:
    """A message sent from outside the session, as it is queued: any id is accepted, but
    one of the form the session gives its own messages (``message_id``) could name
    another message of the array, so it moves to ``given_id`` and the message takes the
    session's id when it joins, as one sent without an id does. An id of any other form
    stays in ``id``: the session never gives one like it, and arrays kept before stay
    exactly as they were. A ``given_id`` the message brings is the session's to set,
    never the sender's: it is dropped."""
    if message.id is None or not _OWN_FORM.fullmatch(message.id):
        return (
            message if message.given_id is None else message.model_copy(update={"given_id": None})
        )
    return message.model_copy(update={"id": None, "given_id": message.id})


def sender_id(message: Message) -> str | None:
    """The id the sender gave a message (``None``: it gave none), which is what a client
    that sent it knows it by: ``given_id``, else an ``id`` the session would never
    give. A reader looking for a client's own message goes by this, never by ``id``
    alone, which may be the session's."""
    if message.given_id is not None:
        return message.given_id
    if message.id is not None and not _OWN_FORM.fullmatch(message.id):
        return message.id
    return None


class Transcript(Sequence[Message]):
    """An append-only message list that knows the chain hash and JSON size of every prefix.

    Both are worked out when first asked for, and only as far as asked: a run that adopts
    10,000 carried messages does no hashing in the task that adopts them, and a caller
    that wants the prefix of 2,000 pays for 2,000 (the workflow spreads the rest over
    the tasks that store the array in pieces). The values are the same either way."""

    def __init__(
        self, messages: Iterable[Message] = (), root: str = EMPTY_HASH, *, ids: bool = False
    ) -> None:
        self._messages: list[Message] = list(messages)
        self.ids = ids
        """``join`` gives each message without an id its stable id (``message_id``)."""
        self._hashes: list[str] = [root]
        self._contents: list[str] = []
        self._sizes: list[int] = [0]
        self._ahead: dict[int, _Ahead] = {}
        """Messages encoded (or told of) before they were appended, by ``id`` (the
        message is kept too: its id cannot be taken by another while the entry lives)."""

    @classmethod
    def adopt(
        cls, messages: list[Message], root: str = EMPTY_HASH, *, ids: bool = False
    ) -> Transcript:
        """A transcript over ``messages`` itself: what is appended lands in that very list
        (the session state's, so it is carried without a copy)."""
        transcript = cls(root=root, ids=ids)
        transcript._messages = messages
        return transcript

    @property
    def root(self) -> str:
        return self._hashes[0]

    @property
    def takes_digests(self) -> bool:
        """Its links take a message's content hash alone (the version-2 hash chain): a digest
        and size a worker works out spare the workflow encoding the message."""
        return hash_version(self.root) == 2

    def encode_ahead(
        self, message: Message, digest: str | None = None, size: int | None = None
    ) -> None:
        """Encode a message that is about to be appended (a tool result as it arrives):
        a batch of thousands is then encoded over the tasks its results came in, not
        all in the task that appends them. ``digest`` and ``size``: its content hash and
        ``payload_bytes``, when the worker that made it worked them out; in the second
        chain the message is then not encoded at all. Values are the same either way."""
        known = self._ahead.get(id(message))
        if known is not None and known[0] is message:
            return  # told of already
        if digest is not None and size is not None:
            encoded = None if self.takes_digests else canonical_json(message).encode()
            self._ahead[id(message)] = (message, encoded, size, digest)
        else:
            encoded = canonical_json(message).encode()
            self._ahead[id(message)] = (message, encoded, payload_bytes(message), None)

    def _known(self, count: int) -> None:
        """Hashes and sizes of the first ``count`` messages, from where they stopped."""
        second = self.takes_digests
        for message in self._messages[len(self._contents) : count]:
            ahead = self._ahead.pop(id(message), None)
            if ahead is not None and ahead[0] is message:
                _, encoded, size, digest = ahead
            else:
                encoded, size, digest = None, payload_bytes(message), None
            if encoded is None and (digest is None or not second):  # once, for both
                encoded = canonical_json(message).encode()
            if digest is None:
                assert encoded is not None
                digest = _digest(encoded)
            if second:
                self._hashes.append(_linked(self._hashes[-1], digest))
            else:
                assert encoded is not None
                self._hashes.append(_chained(self._hashes[-1], encoded))
            self._contents.append(digest)
            self._sizes.append(self._sizes[-1] + size)
        if len(self._contents) == len(self._messages):
            self._ahead.clear()  # what was encoded and never appended (a copy went in)

    def append(self, message: Message) -> None:
        """Add a message exactly as it is (one read back from the store, say)."""
        self._messages.append(message)

    def extend(self, messages: Iterable[Message]) -> None:
        self._messages.extend(messages)

    def next_id(self, offset: int = 0) -> str | None:
        """The id ``join`` gives the message ``offset`` places after the last one now
        (``None``: this array gives no ids). A worker that makes the message is told
        it, so the message it returns, digests and stores is the one that joins."""
        return message_id(len(self._messages) + offset) if self.ids else None

    def join(self, message: Message) -> None:
        """Add a message the session made or took in: one without an id gets its stable
        id (``ids``); an id given is kept as it is."""
        if self.ids and message.id is None:
            message = message.model_copy(update={"id": message_id(len(self._messages))})
        self._messages.append(message)

    def join_all(self, messages: Iterable[Message]) -> None:
        if not self.ids:
            self._messages.extend(messages)
            return
        for message in messages:
            self.join(message)

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

    def end_within(self, start: int, limit: int, most_bytes: int) -> int:
        """The furthest ``end`` (``start`` to ``limit``) with messages ``[start:end]``
        within ``most_bytes`` (``json_bytes``): found in the sizes at once, not by asking
        for one more message at a time."""
        self._known(limit)
        return bisect_right(self._sizes, self._sizes[start] + most_bytes, start, limit + 1) - 1

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


# Branches of a conversation (pure): where a fork may cut an array, the array a fork
# starts from, and where two branches part.
#
# A fork point may not fall inside a tool batch: an assistant message's calls and their
# results (in request order, right after it) stay together, or the branch would begin
# with calls nobody answers.

def fork_problem(messages: Sequence[Message], at: int) -> str | None:
    """Why the first ``at`` messages of ``messages`` cannot start a branch (``None``:
    they can)."""
    if at < 1 or at > len(messages):
        return f"fork at {at}: the session has {len(messages)} messages (fork at 1 to it)"
    for index in range(at - 1, -1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls = len(message.tool_calls)
            answered = sum(isinstance(m, ToolMessage) for m in messages[index + 1 : at])
            if answered < calls:
                after = index + 1 + calls
                return (
                    f"fork at {at}: that splits the tool batch of message {index} "
                    f"({answered} of its {calls} results before it); fork at {index} or "
                    f"{after}"
                )
            return None
        if not isinstance(message, ToolMessage):
            return None
    return None


def with_instructions(messages: list[Message], instructions: str | None) -> list[Message]:
    """The branch's array under the new spec's instructions: its first system message
    says them instead (the parent's array is not touched)."""
    if instructions is None or not messages or not isinstance(messages[0], SystemMessage):
        return messages
    if messages[0].content == instructions:
        return messages
    return [messages[0].model_copy(update={"content": instructions}), *messages[1:]]


@dataclass(frozen=True)
class BranchDiff:
    """Two conversations from where they part: ``common`` messages are the same in
    both; ``left`` and ``right`` are what each has after them."""

    common: int
    left: list[Message]
    right: list[Message]


def diff_branches(left: Sequence[Message], right: Sequence[Message]) -> BranchDiff:
    """Where two arrays part. Messages compare by what they say (role, text, calls),
    not by when they were written or who approved a call (its result says what it
    did)."""
    common = 0
    for a, b in zip(left, right, strict=False):
        if _said(a) != _said(b):
            break
        common += 1
    return BranchDiff(common, list(left[common:]), list(right[common:]))


def message_line(message: Message, width: int = 100) -> str:
    """A message in one line, for reports: its role, its text (spaces folded, cut at
    ``width``) and its tool calls."""
    text = message.content if isinstance(message.content, str) else "[parts]"
    said = " ".join(text.split())[:width]
    calls = getattr(message, "tool_calls", None) or []
    called = ", ".join(f"{c.function.name}({c.function.arguments})" for c in calls)
    return f"{message.role}: " + " ".join(p for p in (said, called and f"-> {called}") if p)


def _said(message: Message) -> object:
    return message.model_dump(mode="json", exclude={"timestamp", "usage", "model", "approval"})
