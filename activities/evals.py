"""The evaluation's side effect: a case's session read back and scored.

Its session has ended; this activity asks it for its array and result (a query and
the workflow's result, both from Temporal), and scores it with the pure scorers. Only
the facts and scores go back into the evaluation's history, not the transcript.
"""

from __future__ import annotations

from temporalio import activity

from durable_agent._contracts._contracts import AgentResult
from durable_agent._contracts._eval_cases import CaseScored, CaseToScore
from durable_agent._contracts._eval_scoring import case_facts, score_case

from .heartbeat import heartbeats
from .resumption import read_messages


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
