"""The live log is sized and cut without encoding it: ``wire_size`` gives each event's
size as ``WorkflowStream.get_state`` would write it (base64 of the payload's bytes, and
the topic), ``log_over`` tells a log over a size, and ``keep_newest`` keeps exactly the
events the old way (encode all, keep the newest within the bytes) kept: sizing events
when it looks, or with the sizes ``EventSizes`` took as they were published (some
published by others, as the model's deltas are by signal, and a cut on the way). Run in a real
workflow on the dev server, with events of every length modulo 3 (base64 pads to whole
quads)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from durable_agent._workflows.live_feed import (
        EventSizes,
        keep_newest,
        log_over,
        logged,
        wire_size,
    )


@dataclass
class Sizes:
    base: int
    ours: list[int]
    encoded: list[int]
    kept_offsets: list[int]
    expected_offsets: list[int]
    over: list[bool]


@workflow.defn(sandboxed=False)
class LogSizes:
    @workflow.init
    def __init__(self, count: int, capacity: int, remember: bool) -> None:
        self.stream = WorkflowStream()

    @workflow.run
    async def run(self, count: int, capacity: int, remember: bool) -> Sizes:
        topic, other = self.stream.topic("events"), self.stream.topic("x")
        known = EventSizes() if remember else None
        for n in range(count):
            (topic if n % 5 else other).publish({"n": n, "text": "y" * (n % 97)})
            if known is not None and n % 7:  # every 7th as if published by a signal
                known.published(self.stream)
            if known is not None and n == 300:
                keep_newest(self.stream, 20_000, known)  # a cut on the way
        self.stream.truncate(max(7, logged(self.stream)[0] + 3))  # as after a trim
        state = self.stream.get_state()
        base, items = logged(self.stream)
        ours = [wire_size(item) for item in items]
        encoded = [len(item.topic) + len(item.data) for item in state.log]
        whole = sum(encoded)
        over = [log_over(self.stream, limit, known) for limit in (whole - 1, whole, capacity)]
        # the old cut: encode every event, keep the newest within ``capacity``
        total, keep = 0, 0
        for size in reversed(encoded):
            total += size
            if total > capacity:
                break
            keep += 1
        expected = list(range(state.base_offset + len(encoded) - keep, base + len(encoded)))
        keep_newest(self.stream, capacity, known)
        after = self.stream.get_state()
        kept = list(range(after.base_offset, after.base_offset + len(after.log)))
        return Sizes(base, ours, encoded, kept, expected, over)


@pytest.mark.parametrize("remember", [False, True], ids=["sized-when-looked-at", "remembered"])
async def test_sizes_match_the_encoded_log_and_the_cut_keeps_what_encoding_kept(
    temporal_env: WorkflowEnvironment, task_queue: str, remember: bool
) -> None:
    client = temporal_env.client
    async with Worker(client, task_queue=task_queue, workflows=[LogSizes]):
        sizes = await client.execute_workflow(
            LogSizes.run,
            args=[600, 9_000, remember],
            id=f"log-sizes-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
    if remember:  # the cut at event 300 left the newest 20 KB of 301, then 3 more went
        assert 7 < sizes.base < 300 and len(sizes.encoded) == 600 - sizes.base
    else:
        assert sizes.base == 7 and len(sizes.encoded) == 593
    assert sizes.ours == sizes.encoded
    assert len({size % 4 for size in sizes.encoded}) > 1, "topics of two lengths"
    assert 0 < len(sizes.kept_offsets) < len(sizes.encoded), "the cut dropped some, kept some"
    assert sizes.kept_offsets == sizes.expected_offsets
    assert sizes.kept_offsets[-1] == 599, "the newest event is kept"
    assert sizes.over == [True, False, True], "over one byte less, not over its own size"
