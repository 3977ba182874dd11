"""Message logs a worker feeds (``MessageSink``, ``JSONLMessageLog``).

A program passes a sink to its worker (``build_worker(message_log=...)``,
``DurableAgentPlugin(message_log=...)``, ``durable-agent worker --message-log DIR``).
The worker gives it every message of every session it serves, once each, in array
order, with its context: the session, the index in the array, the conversation turn
(user messages so far), the iteration within it (assistant messages since) and the
agent. Messages reach it as the workers' transcript store takes them: at each model
call, and before a session waits or ends.

Exactly once: replays never call a sink (only activities do), but a worker that dies
mid-call has its call retried, maybe elsewhere, and the retry offers the same messages
again. So a sink says how many of a session's messages it holds (``logged``) and skips
any index it already has; ``JSONLMessageLog`` does both under a file lock, so workers
sharing its directory write each line once.

``MessageFeed`` feeds a worker's log from the arrays its activities see.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol, runtime_checkable

import structlog
from pydantic import BaseModel, ConfigDict
from temporalio import activity

from durable_agent._wire.messages import AssistantMessage, Message, UserMessage


class MessageContext(BaseModel):
    """Where a message stands (the CLI's ``history --jsonl`` lines have the same)."""

    model_config = ConfigDict(frozen=True)

    session: str
    index: int
    turn: int
    """User messages up to and including this one."""
    iteration: int
    """Assistant messages since the latest user message, this one included."""
    agent: str | None = None
    run_id: str | None = None
    """The workflow run that handed the message to the log."""


@runtime_checkable
class MessageSink(Protocol):
    async def logged(self, session: str) -> int:
        """How many of the session's messages (a prefix) the log holds already."""
        ...

    async def append(self, message: Message, context: MessageContext) -> None:
        """Keep one message; an index the log holds already must change nothing."""
        ...


def session_file_stem(session: str) -> str:
    """A file name for a session id, which anyone who starts a session chooses: its
    safe characters and a digest, never a path of the caller's making."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", session)[:80] or "session"
    return f"{safe}-{hashlib.sha256(session.encode()).hexdigest()[:12]}"


class JSONLMessageLog:
    """One JSON object a line (the context's fields and ``message``), in one file per
    session and worker start, named by the session and the UTC time it was opened:
    ``DIR/<session>-<digest>/<YYYYmmddTHHMMSS.nnnnnnnnnZ>-<worker>.jsonl``. A line is
    written once: every append holds the session's lock file while it reads the
    highest index its files hold and writes."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, Path] = {}
        self._instance = uuid.uuid4().hex[:8]
        self._locks: dict[str, asyncio.Lock] = {}

    async def logged(self, session: str) -> int:
        return await asyncio.to_thread(self._count, self._folder(session))

    async def append(self, message: Message, context: MessageContext) -> None:
        lock = self._locks.setdefault(context.session, asyncio.Lock())
        async with lock:
            await asyncio.to_thread(self._append, message, context)

    def _folder(self, session: str) -> Path:
        return self.directory / session_file_stem(session)

    def _append(self, message: Message, context: MessageContext) -> None:
        folder = self._folder(context.session)
        folder.mkdir(exist_ok=True)
        with _locked(folder / ".lock"):
            if context.index < self._count(folder):
                return  # another attempt (or worker) wrote it
            path = self._files.get(context.session)
            if path is None:
                _drop_unfinished_line(folder)
                now = time.time_ns()
                stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 10**9))
                # sorted by name is in the order opened, and two workers never share one
                name = f"{stamp}.{now % 10**9:09d}Z-{self._instance}.jsonl"
                path = self._files[context.session] = folder / name
            line = context.model_dump(mode="json", exclude_none=True)
            line["message"] = message.model_dump(mode="json", exclude_none=True)
            with path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line, ensure_ascii=False) + "\n")

    @staticmethod
    def _count(folder: Path) -> int:
        """One past the highest index in the session's files (0: none yet). Every file
        counts: two workers' attempts may have written to their own files in turn."""
        files = folder.glob("*.jsonl") if folder.exists() else []
        lasts = [last for path in files if (last := _last_line(path)) is not None]
        return max((int(json.loads(last)["index"]) + 1 for last in lasts), default=0)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _last_line(path: Path) -> str | None:
    """The file's last complete line (what follows the last newline was cut by a crash
    mid-write, and is not one)."""
    with path.open("rb") as data:
        position, tail = data.seek(0, 2), b""
        while position > 0 and tail.count(b"\n") < 2:
            step = min(1 << 16, position)
            position -= step
            data.seek(position)
            tail = data.read(step) + tail
    lines = tail.split(b"\n")[:-1]  # the first may be cut by the read unless it began at 0
    if not lines or (position > 0 and len(lines) < 2):
        return None
    return lines[-1].decode("utf-8")


def _drop_unfinished_line(folder: Path) -> None:
    """A worker that died mid-write left part of a line: cut it, so every line parses
    (its message is written again, whole)."""
    for path in folder.glob("*.jsonl"):
        _cut_after_last_newline(path)


def _cut_after_last_newline(path: Path) -> None:
    with path.open("rb+") as data:
        size = data.seek(0, 2)
        position = size
        while position > 0:
            step = min(1 << 16, position)
            data.seek(position - step)
            chunk = data.read(step)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = position - step + cut + 1
                if keep != size:
                    data.truncate(keep)
                return
            position -= step
        data.truncate(0)


# Feeding the worker's message log from the arrays its activities see.
#
# A model call (and a store of the array's tail) holds a session's whole array; the
# messages past what the log already holds go to it, in order, with their context. The
# conversation turn and iteration of the next message are remembered per session, so a
# call counts only what is new (the first call after a worker start counts its prefix
# once).

log = structlog.get_logger("durable_agent.message_log")

#: Sessions whose position this worker remembers (older ones are counted again).
REMEMBERED_SESSIONS = 4096


class _Position:
    """The log's next index in a session, and the turn and iteration reached there."""

    def __init__(self) -> None:
        self.index = self.turn = self.iteration = 0

    def step(self, message: Message) -> None:
        if isinstance(message, UserMessage):
            self.turn, self.iteration = self.turn + 1, 0
        elif isinstance(message, AssistantMessage):
            self.iteration += 1
        self.index += 1


class MessageFeed:
    def __init__(self, sink: MessageSink) -> None:
        self.sink = sink
        self._positions: OrderedDict[str, _Position] = OrderedDict()

    async def offer(self, conversation: Sequence[Message]) -> None:
        """The session's whole array as this activity holds it. A sink that fails is
        reported and left where it was: the next call offers the rest again."""
        info = activity.info()
        session = info.workflow_id
        if session is None:
            return
        try:
            await self._feed(session, info.workflow_run_id, conversation)
        except Exception as error:  # the log is the program's: the session goes on
            self._positions.pop(session, None)
            log.warning("message log failed; offered again at the next call", error=str(error))

    async def _feed(
        self, session: str, run_id: str | None, conversation: Sequence[Message]
    ) -> None:
        position = self._positions.pop(session, None)
        if position is None or position.index > len(conversation):
            position = _Position()
            held = min(await self.sink.logged(session), len(conversation))
            for message in conversation[:held]:
                position.step(message)
        for message in conversation[position.index :]:
            position.step(message)  # counted first: a user message is its own turn's
            context = MessageContext(
                session=session,
                index=position.index - 1,
                turn=position.turn,
                iteration=position.iteration,
                agent=message.agent_name,
                run_id=run_id,
            )
            await self.sink.append(message, context)
        self._positions[session] = position
        while len(self._positions) > REMEMBERED_SESSIONS:
            self._positions.popitem(last=False)
