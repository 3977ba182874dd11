"""A worker's heap: what it holds once started is frozen, and young collections are
rare (``durable_agent.temporal._process``), in a process of its own so the suite's is not
touched."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import gc, json
before = gc.get_threshold()
import durable_agent.temporal._worker  # a worker's imports, as ``durable-agent worker`` has them
from durable_agent.temporal._process import freeze_startup_heap
from durable_agent.temporal._process import WORKER_GC_THRESHOLDS
frozen = freeze_startup_heap()
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": frozen,
                  "wanted": WORKER_GC_THRESHOLDS, "tracked": len(gc.get_objects())}))
"""


def test_a_started_worker_heap_is_frozen_and_young_collections_are_rare() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout)
    assert seen["before"] == [700, 10, 10]  # CPython's default, which the worker changes
    assert seen["after"] == seen["wanted"] == [10_000, 10, 10]
    assert seen["frozen"] > 50_000  # modules, schemas: left out of every later pass
    assert seen["tracked"] < seen["frozen"] // 10  # what later passes still walk
