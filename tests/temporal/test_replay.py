"""Recorded histories replay against today's workflow code (temporalio's Replayer).

Each history was recorded by the previous release (the retirement rule:
``workflows/patches.py``). A workflow change that alters commands breaks this test;
patch it with ``workflow.patched`` and keep the old path, and record a history of the
new behaviour beside the old ones: ``DURABLE_AGENT_RECORD_HISTORIES=1 ./run test`` (the
tests that record call ``tests.support.agent_harness.record_history``). At a release,
the histories are recorded again (``=overwrite``) and stand for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from durable_agent.temporal import DurableAgentPlugin
from tests.support.docs_page import run_page_block

HISTORIES = sorted((Path(__file__).parent.parent / "histories").glob("*.json"))


def test_histories_are_recorded() -> None:
    assert {p.stem for p in HISTORIES} >= {
        "parallel_batch",
        "tool_errors",
        "approval",  # one approved, one denied
        "approval_timeout",  # both default decisions
        "approval_continued_as_new",  # pending approvals carried to the next run
        "queued_message",
        "continue_as_new",
        "structured_output",
        "multi_turn_session",  # a few turns, titled
        "model_attempt_retried",  # a 503 counted by the workflow, retried on a timer
        "tool_attempts_retried",  # ToolRaised twice (timers), and a last failure
        "cancellation",  # a model call and a tool batch cancelled through Temporal
        "flush",  # flushes while idle and mid-turn
        "guardrails",  # an input and an output guardrail denying
        "compaction",  # summaries by an activity, requests starting from them
        "rescue",  # broken tool-call JSON corrected
        "approval_decisions",  # approve, deny, an edit, a response; a refused edit; a race
        "approval_grants",  # "always" grants across continue-as-new, an edit, a revocation
        "approval_signed",  # signed decisions checked by the workers, refusals, the CLI entry point
        "swarm",  # three agents: handoffs by tool, an approval on billing, transfer_back
        "swarm_continued",  # a run continued as new with tech active (the stack carried)
        "swarm_moved",  # moves rejected, then one by the `temporal` CLI; tech answers
        "live_events",  # text and reasoning deltas published by the model activity
        "live_events_continued",  # the event log carried across continue-as-new
        "update_with_start",  # a conversation started by send_message, titled by it
        "admission",  # admitted by the worker's registries
        "admission_refused",  # a forged continue-as-new input refused at admission
        "carried_refused",  # a first start carrying state, refused
        "sub_agent",  # a child session whose id is bound to the parent's run
        "tool_kind_webhook",  # a kind registered by its module (the manual's webhooks)
        "resumed_conversation",  # a run going on with an ended run's array, by reference
        "runaway_turn_ended",  # max_turns ends the turn, not the session
        "message_log",  # a worker with a message log: the tail offered before waits
        "round_hooks",  # a request and a reply hook; replay reads the rewritten reply
        "wake_up_by_the_model",  # set by the model's tool, slept on a timer, fired once
        "wake_up_by_a_starter",  # set by the set_wake_up update, fired once
        "tool_routes_refused",  # a batch's task queues asked of the worker, one refused
        "fallback_chain",  # three hops across Chat Completions and Anthropic
        "context_overflow_trimmed",  # "context too long", then a shorter request
        "capacity_wait",  # a model call that waited for capacity on a limited endpoint
        "limiter",  # an endpoint's limiter: asks, a line, a kept capacity, releases
        "limiter_bound",  # a limiter whose id names its limits: a forged ask refused
        "forked_session",  # a branch of another session: its start read back by reference
        "evaluation",  # an evaluation: case sessions as children, scored, then the budget
        "moved_to_current_build",  # a pinned run that went on on the new build
        "limiter_moved",  # a limiter woken on the old build, going on on the new
        "agui_interrupt_resumed",  # AG-UI: a call's interrupt, resumed approved, a rejoin
        "start_checks_local",  # admission and tools by local activities
        "carried_read_back",  # a continued run's array the store lost, read back
        "pages_of_500",  # 1,200 messages in pieces and pages of 500
        "started_history",  # a long start's history sent apart, read back in pages
        "second_chain",  # a start in the version-2 hash chain, results by digest
        "second_chain_continued",  # a continued run's pages read back with digests
        "titled_at_start",  # titled by the start's memo: no upsert of its own
        "stored_prefix_kept",  # carried by reference, nothing stored again
        "model_reply_digested",  # each model reply joined by its digest
        "tool_calls_in_pages",  # a reply of 7 calls read in pages of 3
        "tool_calls_in_pages_continued",  # and the page read back that holds it
        "approvals_in_pages",  # 260 calls that wait, asked and approved in pages
        "approval_asked_again_after_reset",  # a reset run asks anew; the old token refused
        "moved_by_a_deploy",  # a drained tool; the next worker told what it lacked
    }


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays(path: Path) -> None:
    run_page_block("## A new tool kind")  # a replaying worker has its kinds registered
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    # as the manual says to replay; in the sandbox, which our workflows skip in
    # production: a change reaching for the clock, a file or randomness fails here
    plugin = DurableAgentPlugin(preload_tokenizers=False, sandboxed=True)
    replayer = Replayer(workflows=[], plugins=[plugin])  # the plugin adds AgentWorkflow
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.stem}: {result.replay_failure}"
