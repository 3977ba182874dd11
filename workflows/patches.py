"""One patch marker for a new run, where it took one per patch.

Every ``workflow.patched(ID)`` that returns true records a marker, and the server an
upsert of ``TemporalChangeVersion`` beside it: a fresh session paid five of each (a
tenth of a short session's events) for patches whose old paths only histories
recorded before them take. A run started on today's code records one marker,
``BASELINE_PATCH``, which stands for every patch in ``BASELINED``. A history recorded
with an older baseline replays with what that one stood for, and one recorded before
any lacks them all, so its replay asks each patch as it always did. A patch added
later is asked on its own until a new baseline takes it in, under a new id, first in
``BASELINES``; a baseline never changes once runs recorded it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from temporalio import workflow

#: The baseline a new run records: every patch before it, stable ids on the messages of
#: a new session, and what a request leaves out counted by its worker.
BASELINE_PATCH = "baseline-2026-11-28b"
#: The baselines before (runs recorded with one replay with what it stood for): the
#: eighth took in the task queues of a batch's calls checked with the session's worker
#: before any is sent, the seventh a message of more tool calls than one page read one
#: page per workflow task, the sixth a model's reply joined to the array by the digest
#: and size its worker worked out, the fifth an array carried by reference without its
#: stored prefix sent again, the fourth the transcript's version-2 hash chain and a title the
#: start's memo holds not upserted again, the third pages of the array of at most 500
#: messages, the second the two checks at a run's start made on the workflow's own worker.
EIGHTH_BASELINE_PATCH = "baseline-2026-11-28"
SEVENTH_BASELINE_PATCH = "baseline-2026-11-27"
SIXTH_BASELINE_PATCH = "baseline-2026-11-26e"
FIFTH_BASELINE_PATCH = "baseline-2026-11-26d"
FOURTH_BASELINE_PATCH = "baseline-2026-11-26c"
THIRD_BASELINE_PATCH = "baseline-2026-11-26b"
SECOND_BASELINE_PATCH = "baseline-2026-11-26"
FIRST_BASELINE_PATCH = "baseline-2026-11"

# Every patch of the workflows, and the path a run recorded before it took. An id is
# recorded in histories: never reuse or rename one.

#: An evaluation answers its cases' calls that wait for a person by its approvals
#: policy (before, such a case waited for a person, silently).
EVAL_APPROVALS_PATCH = "eval-approvals-policy"
#: The spec is admitted by the session's worker (before, nothing was checked).
ADMISSION_PATCH = "worker-admission"
#: Carried state is taken only by a run the previous one continued as new.
CARRIED_ONLY_WHEN_CONTINUED_PATCH = "carried-only-when-continued"
#: An unusable model reply is rescued (before, it was taken as it came).
MODEL_RESCUE_PATCH = "model-rescue"
#: A runaway turn or a model that failed for good ends the turn (it ended the session).
TURN_FAILURES_PATCH = "turn-failures-end-turns"
#: A request the model refused as too long is tried again, shorter (it failed the turn).
CONTEXT_OVERFLOW_PATCH = "context-overflow-trims"
#: A session moves to the build made current at a turn boundary (it stayed on its own).
MOVE_TO_CURRENT_PATCH = "move-to-current-build"
#: The session's title is kept in its memo (``fresh_run``).
SESSION_TITLE_PATCH = "session-title-memo"
#: A session started without a message is titled by its first one (``fresh_run``).
TITLE_FROM_FIRST_MESSAGE_PATCH = "title-from-first-message"
#: The text of content parts counts against ``max_message_chars`` (before, only
#: plain-string messages counted).
MESSAGE_PARTS_PATCH = "message-parts-counted"
#: A cut answer is not taken as complete (``stop.on_truncated``).
TRUNCATED_ANSWERS_PATCH = "truncated-answers"
#: A group's calls are taken in request order by at most ``max_concurrent`` runners
#: (before, every call was a task waiting its turn, and every wake-up looked at each).
CALLS_IN_RUNNERS_PATCH = "tool-calls-in-runners"
#: A sub-agent's child session id ends with the parent's run (no one can take it first).
CHILD_ID_PATCH = "child-id-bound-to-run"
#: Pages of the array are cut by count as well as size, and so are pieces stored
#: (before, a run started with 10,000 messages hashed them all at once).
LOAD_PAGES_BY_COUNT_PATCH = "transcript-pages-by-count"
STORE_PIECES_BY_COUNT_PATCH = "transcript-pieces-by-count"
#: The two checks at a run's start are made on the workflow's own worker (local).
START_CHECKS_LOCAL_PATCH = "start-checks-local"
#: Pages, pieces and carried arrays of at most ``transcript_sync.PAGE_MESSAGES``.
SMALL_PAGES_PATCH = "transcript-pages-of-500"
#: A new session's transcript in the version-2 hash chain (``durable_agent._wire._transcript``):
#: tool results and pages read back join it with the digests their workers worked out.
CHAIN_V2_PATCH = "transcript-chain-2"
#: A title the start's memo already holds is not upserted again (``fresh_run``).
TITLE_AT_START_PATCH = "title-in-start-memo"
#: An array carried by reference sends the store only what it lacks (``continuation``).
STORED_PREFIX_KEPT_PATCH = "hand-over-keeps-stored-prefix"
#: A model's reply comes with its digest and size (``model_calls``).
MODEL_REPLY_DIGEST_PATCH = "model-reply-digested"
#: A message of more tool calls than one page comes with the first page of them, and the
#: rest are read a page per workflow task (``reply_pages``).
CALLS_IN_PAGES_PATCH = "tool-calls-in-pages"
#: A batch of more calls than a page is judged, asked, approved by a grant and announced
#: a page per workflow task. Asked only once a batch has more than a page of approval
#: work: a run never asked records no marker.
APPROVALS_IN_PAGES_PATCH = "approvals-in-pages"
#: The task queues a batch's calls are recorded to go to are checked with the session's
#: worker (``check_tool_routes``) before any is sent (``tool_calls``).
ROUTES_CHECKED_PATCH = "tool-routes-checked"
#: A continued run whose carried array the store lost reads it back from the run before
#: (it failed the session).
READ_BACK_LOST_CARRY_PATCH = "read-back-lost-carry"
#: A limiter on a build no longer current goes on as a new run on the current one.
LIMITER_MOVES_PATCH = "limiter-moves-to-current-build"
#: Every message a new session adds to its array gets a stable id, for the session's
#: life (``SessionState.message_ids``); a session opened before keeps its array as it was.
MESSAGE_IDS_PATCH = "message-ids"
#: What a request leaves out to fit the context budget is counted by the worker that
#: shapes it, not in the workflow (``Compatibility.workers_count_trimmed``).
WORKERS_COUNT_TRIMMED_PATCH = "workers-count-trimmed"

#: The session's patches as of ``FIRST_BASELINE_PATCH`` (``tests/temporal/test_patches.py`` checks
#: each is one the workflow code names).
FIRST_BASELINED = frozenset(
    {
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
    }
)
SECOND_BASELINED = FIRST_BASELINED | {START_CHECKS_LOCAL_PATCH}
THIRD_BASELINED = SECOND_BASELINED | {SMALL_PAGES_PATCH}
FOURTH_BASELINED = THIRD_BASELINED | {CHAIN_V2_PATCH, TITLE_AT_START_PATCH}
FIFTH_BASELINED = FOURTH_BASELINED | {STORED_PREFIX_KEPT_PATCH}
SIXTH_BASELINED = FIFTH_BASELINED | {MODEL_REPLY_DIGEST_PATCH}
SEVENTH_BASELINED = SIXTH_BASELINED | {CALLS_IN_PAGES_PATCH}
EIGHTH_BASELINED = SEVENTH_BASELINED | {ROUTES_CHECKED_PATCH}
BASELINED = EIGHTH_BASELINED | {MESSAGE_IDS_PATCH, WORKERS_COUNT_TRIMMED_PATCH}
#: Newest first: a run takes the first its history has (a new run, the newest).
BASELINES = (
    (BASELINE_PATCH, BASELINED),
    (EIGHTH_BASELINE_PATCH, EIGHTH_BASELINED),
    (SEVENTH_BASELINE_PATCH, SEVENTH_BASELINED),
    (SIXTH_BASELINE_PATCH, SIXTH_BASELINED),
    (FIFTH_BASELINE_PATCH, FIFTH_BASELINED),
    (FOURTH_BASELINE_PATCH, FOURTH_BASELINED),
    (THIRD_BASELINE_PATCH, THIRD_BASELINED),
    (SECOND_BASELINE_PATCH, SECOND_BASELINED),
    (FIRST_BASELINE_PATCH, FIRST_BASELINED),
)


class Patches:
    """A session run's answer to ``workflow.patched``. Made in the workflow's
    ``__init__``, so the baseline is asked before any handler or step asks a patch."""

    def __init__(self) -> None:
        self._baselined: frozenset[str] = frozenset()
        for baseline, covered in BASELINES:
            if workflow.patched(baseline):
                self._baselined = covered
                break

    def __call__(self, patch_id: str) -> bool:
        return patch_id in self._baselined or workflow.patched(patch_id)


#: The patches of an agent run inside someone else's workflow (``workflows/inline.py``),
#: while it runs: that workflow has no ``patches`` of its own.
_RUN_PATCHES: ContextVar[Patches | None] = ContextVar("durable_agent_run_patches", default=None)


@contextmanager
def run_patches(patches: Patches) -> Iterator[None]:
    """Within the block, ``patched`` answers with ``patches`` (the block's tasks too)."""
    token = _RUN_PATCHES.set(patches)
    try:
        yield
    finally:
        _RUN_PATCHES.reset(token)


def patched(patch_id: str) -> bool:
    """``workflow.patched`` as the session's run answers it (plain ``workflow.patched``
    in a workflow without ``patches``)."""
    patches = _RUN_PATCHES.get() or getattr(workflow.instance(), "patches", None)
    return patches(patch_id) if isinstance(patches, Patches) else workflow.patched(patch_id)
