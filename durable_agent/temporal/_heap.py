"""Keeping the garbage collector's passes short and rare in a worker process.

CPython's full collection walks every object that can hold references, in whichever
thread allocates when it comes due: in a worker, often a workflow task, whose time the
SDK's deadlock detector counts (2 s). A started worker holds about 100,000 such objects
that live as long as the process (modules, pydantic's and temporalio's schemas): every
full pass walked them again, 40 ms of a pass that took 120 to 150 ms in
``./run bench-activations``. Frozen once the worker is built, they are left out of
every later pass. (What sessions hold is not frozen: it is freed when they go.)

A worker also allocates fast (every payload, event and message is a pydantic model
with a dict and a set of its own), so CPython's default thresholds, a young pass every
700 allocations, ran about 250 passes in one round of ``./run bench``'s workload C (50
sessions at once), the older generations' among them: 0.4 to 0.55 s of the worker's 13 s
of CPU. Young passes every 10,000 allocations (most of what they look at is dead by
then) took 0.1 to 0.2 s of it.
"""

from __future__ import annotations

import gc

#: ``gc.set_threshold`` for a worker: young passes every 10,000 net allocations of
#: objects that can hold references (CPython's default is 700); older generations as
#: by default, every 10 passes of the one below.
WORKER_GC_THRESHOLDS = (10_000, 10, 10)


def freeze_startup_heap() -> int:
    """Collect once, then leave every object alive now out of later collections, and
    collect the young generation less often; call it after imports, tool modules and
    tokenizers are loaded, before the worker polls. Returns how many objects were
    frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*WORKER_GC_THRESHOLDS)
    return gc.get_freeze_count()
