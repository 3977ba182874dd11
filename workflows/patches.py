"""Changes to workflow code, and how long the paths of older runs are kept.

The rule (docs/how-to/changing-workflow-code.md): a release replays the histories its
own runs record and those of the release before it, and no older ones. Before a
release is deployed, every run started on code older than the release before it has
ended or moved (``durable-agent versions move``: it continues as new, on the current
build, at its next turn boundary).

So a patch lives for two releases. The release that makes a change asks
``workflow.patched(ID)`` where it takes effect and keeps both paths. The next release
keeps the new path alone and, where the previous release's runs recorded the marker,
consumes it with ``retired(ID)``. The release after that drops the call.

This release replays the runs of 0.1.0, which recorded ``PREVIOUS_BASELINE`` at their
start (one marker standing for every patch of that release) and, where each took
effect, the patches in ``PREVIOUS_RELEASE_ASKED``. No patch of its own is asked.
"""

from __future__ import annotations

from temporalio import workflow

#: The marker each run of the previous release recorded as its first command.
PREVIOUS_BASELINE = "baseline-2026-11-28b"

#: Patches the previous release asked on their own, where they took effect (the
#: baseline did not stand for them): a batch of thousands asked in pages, a carried
#: array the store lost read back, a limiter moving to the current build, an
#: evaluation answering its cases' calls by its policy, and the calls of a long reply
#: read in pages where a run asked before its baseline was at hand.
APPROVALS_IN_PAGES_PATCH = "approvals-in-pages"
READ_BACK_LOST_CARRY_PATCH = "read-back-lost-carry"
LIMITER_MOVES_PATCH = "limiter-moves-to-current-build"
EVAL_APPROVALS_PATCH = "eval-approvals-policy"
CALLS_IN_PAGES_PATCH = "tool-calls-in-pages"
PREVIOUS_RELEASE_ASKED = frozenset(
    {
        APPROVALS_IN_PAGES_PATCH,
        READ_BACK_LOST_CARRY_PATCH,
        LIMITER_MOVES_PATCH,
        EVAL_APPROVALS_PATCH,
        CALLS_IN_PAGES_PATCH,
    }
)

#: Every patch id older runs may hold and this code no longer asks: their paths are
#: gone. A history holding one of these that is not consumed above was recorded by code
#: older than the previous release (the replay gate says so). An id is never reused.
RETIRED_PATCHES = frozenset(
    {
        "baseline-2026-11-28",
        "baseline-2026-11-27",
        "baseline-2026-11-26e",
        "baseline-2026-11-26d",
        "baseline-2026-11-26c",
        "baseline-2026-11-26b",
        "baseline-2026-11-26",
        "baseline-2026-11",
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
        "start-checks-local",
        "transcript-pages-of-500",
        "transcript-chain-2",
        "title-in-start-memo",
        "hand-over-keeps-stored-prefix",
        "model-reply-digested",
        "tool-routes-checked",
        "message-ids",
        "workers-count-trimmed",
    }
)


def retired(patch_id: str) -> None:
    """Consume the marker a run of the previous release may have recorded here (it
    took the path this code takes). A new run records it as deprecated, which the next
    release may leave unasked."""
    workflow.deprecate_patch(patch_id)
