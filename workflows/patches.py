"""One patch marker for a new run, where it took one per patch.

Every ``workflow.patched(ID)`` that returns true records a marker, and the server an
upsert of ``TemporalChangeVersion`` beside it: a fresh session paid five of each (a
tenth of a short session's events) for patches whose old paths only histories
recorded before them take. A run started on today's code records one marker,
``BASELINE_PATCH``, which stands for every patch in ``BASELINED``. A history recorded
before it lacks that marker, so its replay asks each patch as it always did; a patch
added after it is asked on its own (a later baseline may take it in, under a new id;
this one never changes).
"""

from __future__ import annotations

from temporalio import workflow

BASELINE_PATCH = "baseline-2026-11"

#: The session's patches as of ``BASELINE_PATCH`` (``tests/test_replay.py`` checks each
#: is one the workflow code names).
BASELINED = frozenset({
    "worker-admission",
    "carried-only-when-continued",
    "model-rescue",
    "turn-failures-end-turns",
    "context-overflow-trims",
    "move-to-current-build",
    "session-title-memo",
    "title-from-first-message",
    "message-parts-counted",
    "truncated-answers",
    "tool-calls-in-runners",
    "child-id-bound-to-run",
    "transcript-pages-by-count",
    "transcript-pieces-by-count",
})  # fmt: skip


class Patches:
    """A session run's answer to ``workflow.patched``. Made in the workflow's
    ``__init__``, so the baseline is asked before any handler or step asks a patch."""

    def __init__(self) -> None:
        self._all = workflow.patched(BASELINE_PATCH)

    def __call__(self, patch_id: str) -> bool:
        return (self._all and patch_id in BASELINED) or workflow.patched(patch_id)


def patched(patch_id: str) -> bool:
    """``workflow.patched`` as the session's run answers it (plain ``workflow.patched``
    in a workflow without ``patches``)."""
    patches = getattr(workflow.instance(), "patches", None)
    return patches(patch_id) if isinstance(patches, Patches) else workflow.patched(patch_id)
