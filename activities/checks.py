"""The check activities: admission (a session's spec checked against this worker's
registries, and carried state checked against the server's record of how the run
began), and an evaluation's case read back from its ended session and scored."""

from __future__ import annotations

import structlog
from temporalio import activity
from temporalio.api.enums.v1 import ContinueAsNewInitiator

from durable_agent._contracts.boundary import (
    Admission,
    AdmissionInput,
    AgentResult,
    ToolRoutes,
    ToolRoutesInput,
)
from durable_agent._contracts.evals import CaseScored, CaseToScore, case_facts, score_case
from durable_agent._tools.registry import Registry
from durable_agent.capabilities import Capabilities
from durable_agent.capabilities._admission import admission_problems, registered_prices

from .resumption import read_messages
from .running import heartbeats

log = structlog.get_logger("durable_agent.admission")


class AdmissionActivities:
    def __init__(
        self,
        capabilities: Capabilities,
        registry: Registry | None = None,
        *,
        message_log: bool = False,
    ) -> None:
        self._capabilities = capabilities
        self._registry = registry if registry is not None else Registry()
        self._message_log = message_log

    @activity.defn(name="admit_session")
    @heartbeats
    async def admit_session(self, request: AdmissionInput) -> Admission:
        """What the spec may not use here (the session's own task queue is the one
        this activity runs on: a workflow's activities default to its queue)."""
        own_queue = activity.info().task_queue
        refused = await admission_problems(
            request.spec, self._capabilities, own_queue, self._registry
        )
        if request.carried:
            refused += await _carry_problems()
        if refused:
            log.warning("session refused at admission", refused=refused)
        storage = activity.client().data_converter.external_storage
        threshold = storage.payload_size_threshold if storage is not None else None
        prices = registered_prices(request.spec, self._capabilities)
        return Admission(
            refused=refused,
            payload_store_bytes=threshold,
            message_log=self._message_log,
            prices=prices,
            limited=bool(self._capabilities.limits),
        )

    @activity.defn(name="check_tool_routes")
    async def check_tool_routes(self, request: ToolRoutesInput) -> ToolRoutes:
        """The task queues this worker's owner does not route tool calls to (asked on
        the session's own worker, the one that would send them, before each batch)."""
        own_queue = activity.info().task_queue
        capabilities = self._capabilities
        listed = ", ".join(sorted(capabilities.task_queues)) or "none"
        return ToolRoutes(
            refused={
                queue: f"task queue {queue!r} is not one this worker routes tool calls to "
                f"(registered: {listed})"
                for queue in request.queues
                if not capabilities.task_queue_allowed(queue, own_queue)
            }
        )


async def _carry_problems() -> list[str]:
    """Why this run may not take the state its input carries: only a run the session's
    own workflow started by continuing as new may (the server records who began each
    run, and a reset keeps the record). A cron run or a retry gets the first run's input
    again, which anyone who can start a workflow wrote."""
    info = activity.info()
    handle = activity.client().get_workflow_handle(
        info.workflow_id or "", run_id=info.workflow_run_id
    )
    async for event in handle.fetch_history_events(page_size=1):
        began = event.workflow_execution_started_event_attributes
        if began.initiator == ContinueAsNewInitiator.CONTINUE_AS_NEW_INITIATOR_WORKFLOW:
            return []
        how = ContinueAsNewInitiator.Name(began.initiator).removeprefix(
            "CONTINUE_AS_NEW_INITIATOR_"
        )
        return [
            f"carried: this run began by {how.lower().replace('_', ' ')}, not by the session "
            "continuing as new; carried state (grants, decisions, tools, messages) is taken "
            "only from the session's own previous run"
        ]
    return ["carried: the server has no record of how this run began"]


# The evaluation's side effect: a case's session read back and scored.
#
# Its session has ended; this activity asks it for its array and result (a query and
# the workflow's result, both from Temporal), and scores it with the pure scorers. Only
# the facts and scores go back into the evaluation's history, not the transcript.

class EvalActivities:
    @activity.defn(name="score_case")
    @heartbeats
    async def score_case(self, request: CaseToScore) -> CaseScored:
        handle = activity.client().get_workflow_handle(request.session_id, result_type=AgentResult)
        result = await handle.result()
        messages = await read_messages(handle)
        final = result.final
        answer = final.content if final is not None and isinstance(final.content, str) else ""
        facts = case_facts(messages, answer, result.structured_output)
        return CaseScored(facts=facts, scores=score_case(request.case, facts))
