"""Continue-as-new: the session's state handed to a fresh run, with the array inline,
or by reference to the workers' store when it does not fit one payload or is longer
than one page (``PAGE_MESSAGES``).

``ContinuedInput`` is the next run's input."""

from __future__ import annotations

import asyncio
import logging

from pydantic import BaseModel, ConfigDict, model_validator
from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStreamState

from durable_agent._session import SessionState
from durable_agent._spec.document import AgentSpec

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.boundary import TranscriptRef
    from durable_agent._session import Session
    from durable_agent._session.protocol import ContinueAsNewDeferred, MoveToCurrentAsked

    from .live_feed import LiveFeed
    from .telemetry import session_log, warn
    from .transcript_sync import PAGE_MESSAGES, PAYLOAD_MARGIN_BYTES, TranscriptSync


# A run's input after continue-as-new: the spec, the Session's carried state and the
# live event log's newest part (temporalio's stream state: this is a Temporal contract,
# so it lives beside the workflow, not in the pure core).

class ContinuedInput(BaseModel):
    """A run's input after continue-as-new: the spec and the carried state (the same JSON
    shape ``AgentInput`` had with ``carried``, so recorded histories still read)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    spec: AgentSpec
    carried: SessionState
    events: WorkflowStreamState | None = None
    """The newest of the session's live events (their offsets go on in the new run)."""

    @model_validator(mode="before")
    @classmethod
    def _no_fresh_fields(cls, value: object) -> object:
        if isinstance(value, dict) and (value.get("message") is not None or value.get("history")):
            raise ValueError("carried: a continued session takes no message or history")
        if isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in ("message", "history")}
        return value


#: The next run's first task goes to the current build (then it is pinned there).
AUTO_UPGRADE = workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE
#: What Temporal accepts in one payload (a bigger continue-as-new input fails the task).
PAYLOAD_LIMIT_BYTES = 2_000_000


async def hand_over(
    session: Session, sync: TranscriptSync, feed: LiveFeed, *, upgrade: bool = False
) -> None:
    """Continue as new (returns only when the state cannot be carried yet). Only between
    activities, handlers done (the event log's long-polling readers let go first).
    ``upgrade``: the next run starts on the build the workers' owner made current."""
    feed.let_go()
    await _settled()
    asked = session.view.loop.move_to_current
    if upgrade:  # the next run is on the current build: the request is carried out
        session.handle(MoveToCurrentAsked(False), workflow.now())
    spec, messages = session.spec, session.messages
    state = session.for_next_run().model_copy(update={"stored_count": sync.stored})
    # a long array by reference without sizing it (sizing hashes every message not yet
    # hashed, and the next run would decode it all in its first task), nor the rest
    # (the event log is cut and encoded once, when the array is stored)
    by_reference = len(messages) > PAGE_MESSAGES
    if not by_reference:
        events = feed.state_for_next_run()
        bare = state.model_copy(update={"messages": []})
        others = len(ContinuedInput(spec=spec, carried=bare, events=events).model_dump_json())
        capacity = spec.session.payload_budget_bytes - PAYLOAD_MARGIN_BYTES // 8
        by_reference = others + messages.json_bytes() > capacity
    if by_reference:
        # too big for one payload (or too long): the store gets what it lacks, in pieces,
        # and the next run reads the array back from there. What the model calls stored
        # is not sent again; a store that lost it says so, and then it is sent from the
        # top.
        await sync.store_pieces(until_inline_bytes=0)
        await _settled()
        ref = TranscriptRef(count=len(messages), hash=messages.head)
        state = session.for_next_run().model_copy(
            update={"messages": [], "transcript": ref, "stored_count": sync.stored}
        )
        events = feed.state_for_next_run()  # handlers ran while the array was stored
    carried = ContinuedInput(spec=spec, carried=state, events=events)
    # inline, the test above kept the whole under the budget; by reference, messages
    # queued while the array was stored can still make the rest too big (it is small to
    # encode: no array)
    if by_reference and len(carried.model_dump_json()) > PAYLOAD_LIMIT_BYTES:
        # messages queued while the array was stored: deliver them in this run first
        warn(session, "continue-as-new deferred: the carried state is over 2 MB")
        session.handle(ContinueAsNewDeferred(), workflow.now())
        session.handle(MoveToCurrentAsked(asked), workflow.now())
        return
    if upgrade:
        session_log(session, logging.INFO, "moving to the current build (run %d)", state.runs)
        workflow.continue_as_new(carried, initial_versioning_behavior=AUTO_UPGRADE)
    session_log(session, logging.INFO, "continuing as new (run %d follows)", state.runs)
    workflow.continue_as_new(carried)


async def _settled() -> None:
    """Every signal delivered so far is in the state about to be carried: handlers of
    signals that came with this workflow task run first (one turn of the loop), then
    every handler has finished. Without the turn, a decision that arrived with the task
    that continues as new could be recorded after the state was taken, and lost."""
    await asyncio.sleep(0)
    await workflow.wait_condition(workflow.all_handlers_finished)
