"""Keeping the garbage collector's full passes short in a worker process.

CPython's full collection walks every object that can hold references, in whichever
thread allocates when it comes due: in a worker, often a workflow task, whose time the
SDK's deadlock detector counts (2 s). A started worker holds about 100,000 such objects
that live as long as the process (modules, pydantic's and temporalio's schemas): every
full pass walked them again, 40 ms of a pass that took 120 to 150 ms in
``./run bench-activations``. Frozen once the worker is built, they are left out of
every later pass. (What sessions hold is not frozen: it is freed when they go.)
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collect once, then leave every object alive now out of later collections; call
    it after imports, tool modules and tokenizers are loaded, before the worker polls.
    Returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
