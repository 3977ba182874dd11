"""What the workers' transcript store holds of a session, and bringing it up to date.

Deterministic workflow code. The workflow appends to ``messages``; model calls then
carry only what the store lacks (``reference`` + ``new_messages``), and anything that
would not fit one payload goes to the store first, in budget-sized pieces.

A message of thousands of tool calls is read back one page per workflow task
(``calls_per_page``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.boundary import (
        ClosedRunInput,
        LoadTranscriptInput,
        ReplyCallsInput,
        StoredMessageRef,
        StoreTranscriptInput,
        TranscriptPage,
        TranscriptRef,
        with_calls,
    )
    from durable_agent._errors import Failure, PayloadTooLarge
    from durable_agent._wire.messages import AssistantMessage, Message, ToolCall
    from durable_agent._wire.transcript import Transcript, hash_version

    from .patches import CALLS_IN_PAGES_PATCH, READ_BACK_LOST_CARRY_PATCH, retired
    from .retries import LOST_WORK_RETRIES


# A message of thousands of tool calls read a page per workflow task.
#
# Decoding a reply of 2,500 calls takes its task longer than a reply of a hundred takes
# all of its work, and so does a page read back that holds it after continue-as-new. The
# worker sends such a message with its first ``CALLS_PER_PAGE`` calls (and keeps it whole
# in the store); the rest come from ``reply_calls``, one page per activity, so each task
# decodes one page. Pages are read one after the other: results of activities running
# at once would arrive in one task together. Until they are read, the store holds the
# only whole copy: a store that lost it is answered by asking the model again
# (``model_calls``).

#: Tool calls one payload brings at most (a task decodes a page in about a millisecond).
CALLS_PER_PAGE = 250


def calls_per_page() -> int:
    """What a session's model setup and a page read back ask for."""
    retired(CALLS_IN_PAGES_PATCH)  # some runs of the previous release asked it here
    return CALLS_PER_PAGE


async def whole_message(
    message: Message, key: str, calls: int, heartbeat: timedelta | None
) -> tuple[AssistantMessage, frozenset[str]]:
    """``message`` (cut to its first tool calls) with all ``calls`` of them, read from the
    store where the worker kept it under ``key``, a page at a time, each page as long as
    the first (the page the worker chose; a replay reads the same pages); and the names
    of the tools it calls, gathered one page per workflow task."""
    if not isinstance(message, AssistantMessage) or not message.tool_calls:
        raise ApplicationError("only a message with tool calls is sent in pages")
    read: list[ToolCall] = list(message.tool_calls)
    called = {call.function.name for call in read}
    per_page = len(read)
    while len(read) < calls:
        start, stop = len(read), min(len(read) + per_page, calls)
        page: list[ToolCall] = await workflow.execute_activity(
            "reply_calls",
            ReplyCallsInput(key=key, start=start, stop=stop),
            result_type=list[ToolCall],
            start_to_close_timeout=timedelta(seconds=60),
            heartbeat_timeout=heartbeat,
            retry_policy=LOST_WORK_RETRIES,
            summary=f"reply_calls {start}-{stop} of {calls}",
        )
        if len(page) != stop - start:
            raise ApplicationError(
                f"the store holds {start + len(page)} of the message's {calls} tool calls",
                type=Failure.TRANSCRIPT_MISMATCH,
                non_retryable=True,
            )
        read.extend(page)
        called.update(call.function.name for call in page)
    return with_calls(message, read), frozenset(called)


#: Capacity kept in every payload for what is not messages (ids, hashes, summaries).
PAYLOAD_MARGIN_BYTES = 8_192
#: What a tool result sent by reference costs in a model call's input.
REFERENCE_BYTES = 48


#: Messages one page of ``load_transcript`` (or one piece of ``store_transcript``, or an
#: array carried inline to the next run) holds at most: each is hashed, or decoded, in
#: one workflow task, which must stay far inside the SDK's 2 s on a machine loaded many
#: times past its cores (500 small messages: a few ms of CPU).
PAGE_MESSAGES = 500


class TranscriptSync:
    def __init__(
        self, messages: Transcript, stored: int, budget_bytes: int, heartbeat: timedelta
    ) -> None:
        self.messages = messages
        self._heartbeat = heartbeat
        self.stored = stored
        """How many messages (a prefix) the store holds, as far as this run knows."""
        self.budget_bytes = budget_bytes
        self._by_reference: set[int] = set()
        self.payload_store_bytes: int | None = None
        """Set when the workers keep large payloads in a payload store: a message over
        the budget then goes to the store alone (history holds a reference to it)."""
        self.logged = False
        """Set when the workers feed a message log, which takes the messages a model
        call or a store is sent: the rest are offered before the session waits or ends."""
        self.offered = 0
        """How many messages (a prefix) were sent to an activity that feeds the log."""

    @property
    def capacity(self) -> int:
        """Bytes of messages one payload may carry, leaving space for everything else."""
        return self.budget_bytes - min(PAYLOAD_MARGIN_BYTES, self.budget_bytes // 8)

    def stored_by_tool(self, first: int) -> Callable[[int], None]:
        """What to tell of each slot of a batch whose result its activity put in the
        store as it is, as it arrives: the batch's results land in slot order from
        ``first`` on (nothing is appended while a batch runs)."""
        return lambda slot: self._by_reference.add(first + slot)

    def stored_through(self, count: int) -> None:
        """A model call succeeded: the worker stored the array it was sent (and the reply,
        if the array holds it unchanged), ``count`` messages in all."""
        self.stored = count

    def lost(self) -> None:
        """The store lacks what a call referred to: the next call sends everything."""
        self.stored = 0
        self._by_reference.clear()

    def reference(self) -> TranscriptRef | None:
        """The prefix the store holds (``None``: none; the head sent with it names the
        chain the worker is to store in)."""
        if not self.stored:
            return None
        return TranscriptRef(count=self.stored, hash=self.messages.hash_at(self.stored))

    def new_messages(self, end: int | None = None) -> list[Message | StoredMessageRef]:
        """What the store lacks (up to ``end``): messages after its prefix, tool results
        by reference (whole while the store is being re-seeded)."""
        end = len(self.messages) if end is None else end
        if not self.stored or not self._by_reference:
            return list[Message | StoredMessageRef](self.messages[self.stored : end])
        new: list[Message | StoredMessageRef] = []
        for index in range(self.stored, end):
            if index in self._by_reference:
                new.append(StoredMessageRef(stored=self.messages.content_hash_at(index)))
            else:
                new.append(self.messages[index])
        return new

    def _inline_bytes(self) -> int:
        total = 0
        for index in range(self.stored, len(self.messages)):
            if self.stored and index in self._by_reference:
                total += REFERENCE_BYTES
            else:
                total += self.messages.json_bytes(index, index + 1)
        return total

    def _too_much_inline(self, until_inline_bytes: int, most: int | None) -> bool:
        unstored = len(self.messages) - self.stored
        if most is not None and unstored > most:
            return True  # decided without sizing (or hashing) the whole tail
        return unstored > 0 and self._inline_bytes() > until_inline_bytes

    async def store_pieces(self, until_inline_bytes: int) -> None:
        """Send the unstored tail to the store in budget-sized pieces (of at most
        ``PAGE_MESSAGES``) until a model call's input would fit
        ``until_inline_bytes`` and carry at most that many messages."""
        messages, capacity = self.messages, self.capacity
        most = PAGE_MESSAGES if len(messages) - self.stored > PAGE_MESSAGES else None
        while self.stored < len(messages) and self._too_much_inline(until_inline_bytes, most):
            start = self.stored
            limit = len(messages) if most is None else min(len(messages), start + most)
            end = messages.end_within(start, limit, capacity)
            if end == start and self.payload_store_bytes is not None:
                end = start + 1
            elif end == start:
                size = messages.json_bytes(start, start + 1)
                raise PayloadTooLarge(
                    f"message {start} is {size} bytes, over the payload budget of "
                    f"{self.budget_bytes} bytes (a payload store carries bigger ones: "
                    "docs/how-to/operating.md)"
                )
            try:
                await self._store_piece(start, end)
            except ActivityError as error:
                if store_lost(error) and start:
                    self.lost()  # the store lost the prefix too: from the top
                    continue
                raise
            self.stored = end
            self.offered = max(self.offered, end)

    async def _store_piece(self, start: int, end: int) -> None:
        """Messages ``start`` to ``end`` after the stored prefix (none: the prefix is
        read back, which feeds the workers' message log)."""
        messages = self.messages
        await workflow.execute_activity(
            "store_transcript",
            StoreTranscriptInput(
                transcript=self.reference(),
                messages=self.new_messages(end),
                head=messages.hash_at(end),
            ),
            start_to_close_timeout=timedelta(seconds=120),
            heartbeat_timeout=self._heartbeat,
            retry_policy=LOST_WORK_RETRIES,
            summary=f"store_transcript messages {start}-{end - 1}"
            if end > start
            else f"store_transcript (read back for the message log) {end} messages",
        )

    async def store_for_log(self) -> None:
        """Every message to the workers' message log, when there is one: before the
        session waits for people, or ends. What the store lacks goes there (the log is
        fed on the way); a stored tail (a model's reply) is offered by an empty piece."""
        count = len(self.messages)
        if not self.logged or self.offered >= count:
            return
        if self.stored < count:
            await self.store_pieces(until_inline_bytes=0)
        else:
            await self._store_piece(count, count)
        self.offered = count

    async def read_back(self, activity: str, arg: object, summary: str) -> TranscriptRef:
        """Another run's messages, put in the store by a worker: their reference."""
        ref: TranscriptRef = await workflow.execute_activity(
            activity,
            arg,
            result_type=TranscriptRef,
            start_to_close_timeout=timedelta(seconds=300),
            heartbeat_timeout=self._heartbeat,
            retry_policy=LOST_WORK_RETRIES,
            summary=summary,
        )
        return ref

    async def load_carried(self, ref: TranscriptRef) -> None:
        """The array the previous run handed over by reference. If the store lost it (a
        ``memory:`` store whose worker restarted, a pruned or wiped store), the previous
        run, closed now, is read back (its history holds the array) and stored again."""
        try:
            await self.load(ref)
        except ActivityError as error:
            previous = workflow.info().continued_run_id
            if not store_lost(error) or previous is None:
                raise
            retired(READ_BACK_LOST_CARRY_PATCH)
            workflow.logger.warning("the store lost the carried array: reading it back")
            summary = f"closed_conversation of run {previous} (the store lost it)"
            closed = ClosedRunInput(
                run_id=previous, chain=2 if hash_version(ref.hash) == 2 else None
            )
            again = await self.read_back("closed_conversation", closed, summary)
            if again != ref:
                raise ApplicationError(
                    f"the previous run holds {again.count} messages ({again.hash}), "
                    f"not the {ref.count} ({ref.hash}) it carried",
                    type=Failure.TRANSCRIPT_MISMATCH,
                    non_retryable=True,
                ) from None
            await self.load(ref)  # from where the first reading stopped

    async def load(self, ref: TranscriptRef) -> None:
        """Read back the array a previous run left in the store, a page at a time (pages
        of at most ``PAGE_MESSAGES``: each is hashed into the array in one workflow
        task, which must finish well within the SDK's 2 s on a loaded machine)."""
        most = PAGE_MESSAGES
        digested = self.messages.takes_digests or None
        most_calls = calls_per_page() if digested else None
        while len(self.messages) < ref.count:
            start = len(self.messages)
            request = LoadTranscriptInput(
                transcript=ref,
                start=start,
                max_bytes=self.capacity,
                max_messages=most,
                digested=digested,
                calls_per_page=most_calls,
            )
            page: list[Message] | TranscriptPage = await workflow.execute_activity(
                "load_transcript",
                request,
                result_type=TranscriptPage if digested else list[Message],
                start_to_close_timeout=timedelta(seconds=120),
                heartbeat_timeout=self._heartbeat,
                retry_policy=LOST_WORK_RETRIES,
                summary=f"load_transcript from message {len(self.messages)}",
            )
            if isinstance(page, TranscriptPage):  # the version-2 hash chain: nothing encoded here
                if page.calls is not None:  # its last message's calls, one page per workflow task
                    last = page.messages[-1]
                    whole = await whole_message(last, page.digests[-1], page.calls, self._heartbeat)
                    page.messages[-1] = whole[0]
                for message, digest, size in zip(
                    page.messages, page.digests, page.sizes, strict=True
                ):
                    self.messages.encode_ahead(message, digest, size)
                page = page.messages
            self.messages.extend(page)
            # hashed and sized now, in this page's task: left to the end, the whole array
            # would be in one task, past the SDK's 2 s on a busy worker
            self.messages.hash_at(len(self.messages))
        if self.messages.head != ref.hash:
            raise ApplicationError(
                "the stored transcript does not match the one this session carried",
                type=Failure.TRANSCRIPT_MISMATCH,
                non_retryable=True,
            )
        self.stored = ref.count


def store_lost(error: ActivityError) -> bool:
    """The activity found the store lacks what it was pointed at."""
    cause = error.cause
    return isinstance(cause, ApplicationError) and cause.type == Failure.TRANSCRIPT_UNKNOWN
