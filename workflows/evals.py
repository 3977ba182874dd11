"""EvalWorkflow: a dataset of cases run as durable work.

Each case is a one-shot child session of the agent under test, at most
``concurrency`` at once; when it ends, the ``score_case`` activity reads it back and
scores it, and a case with ``criteria`` is judged by a second child session (the
judge's model call is an activity like any other). A case starts only while the
budget has capacity. A case's session tells this workflow which of its calls wait for a
person (the ``child_approvals`` signal, as a sub-agent tells its parent), and the
evaluation's ``approvals`` policy answers them: fail the case, deny or approve them as
its ``approver``, or leave them to a person (the report lists them). The run survives
a lost worker as any workflow does: finished cases are in its history and never run
again, running ones are sessions of their own.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts.approvals import (
        ApprovalSignal,
        ChildApprovals,
        PendingApproval,
    )
    from durable_agent._contracts.boundary import WORKFLOW_NAME, AgentResult
    from durable_agent._contracts.evals import (
        EVAL_WORKFLOW,
        JUDGE_SCHEMA,
        CaseReport,
        CaseScored,
        CaseToScore,
        EvalCase,
        EvalInput,
        EvalReport,
        Score,
        judge_request,
        judge_score,
    )
    from durable_agent._spec.document import AgentInput, AgentSpec

    from .patches import EVAL_APPROVALS_PATCH, retired
    from .retries import LOST_WORK_RETRIES

JUDGE_INSTRUCTIONS = "You judge an agent's answer against a rubric, strictly and briefly."


@workflow.defn(name=EVAL_WORKFLOW, sandboxed=False)  # see durable_agent.temporal._plugin
class EvalWorkflow:
    @workflow.init
    def __init__(self, request: EvalInput) -> None:
        self._request = request
        self._reports: dict[str, CaseReport] = {}
        self._running = 0
        self._tokens = 0
        self._cost: float | None = None
        self._asked: dict[str, list[PendingApproval]] = {}
        """Each case session's calls waiting for a person, as it last reported them."""
        self._failed_by_policy: dict[str, str] = {}
        """Case sessions ended by the ``fail`` policy, and why."""

    @workflow.run
    async def run(self, request: EvalInput) -> EvalReport:
        started: list[asyncio.Task[None]] = []
        for case in request.cases:
            await workflow.wait_condition(lambda: self._running < request.concurrency)
            if self._spent():
                self._reports[case.id] = CaseReport(
                    id=case.id, status="skipped", error="the budget was spent"
                )
                continue
            self._running += 1
            started.append(asyncio.ensure_future(self._case(case)))
        await asyncio.gather(*started)
        return self.report(done=True)

    @workflow.signal(name="child_approvals")
    def child_approvals(self, report: ChildApprovals) -> None:
        """A case's session lists its calls waiting for a person (records only)."""
        earlier = self._asked.get(report.child_id, []) if report.continued else []
        self._asked[report.child_id] = [*earlier, *report.pending]

    @workflow.query(name="report")
    def report(self, done: bool = False) -> EvalReport:
        order = [c.id for c in self._request.cases]
        prefix = f"{workflow.info().workflow_id}--"
        return EvalReport(
            eval_id=workflow.info().workflow_id,
            agent=self._request.agent,
            done=done,
            cases=[self._reports[i] for i in order if i in self._reports],
            tokens=self._tokens,
            cost_usd=self._cost,
            waiting={
                child.removeprefix(prefix): [p.tool_name for p in pending]
                for child, pending in self._asked.items()
                if pending
            },
        )

    async def _case(self, case: EvalCase) -> None:
        began = workflow.now()
        session_id = f"{workflow.info().workflow_id}--{case.id}"
        try:
            result = await self._session(session_id, self._request.spec, case.input)
            scored: CaseScored = await workflow.execute_activity(
                "score_case",
                CaseToScore(session_id=session_id, case=case),
                result_type=CaseScored,
                start_to_close_timeout=timedelta(seconds=120),
                retry_policy=LOST_WORK_RETRIES,
                summary=f"score_case {case.id}",
            )
            scores = list(scored.scores)
            if case.criteria is not None:
                scores.append(await self._judged(case, scored))
            report = CaseReport(
                id=case.id,
                status="scored",
                session_id=session_id,
                scores=scores,
                answer=scored.facts.answer,
                tool_calls=scored.facts.tool_calls,
                tokens=result.usage.prompt_tokens + result.usage.completion_tokens,
                cost_usd=_cost(result),
            )
        except ChildWorkflowError as error:
            why = self._failed_by_policy.pop(session_id, None) or _why(error)
            report = CaseReport(id=case.id, status="failed", session_id=session_id, error=why)
        elapsed = workflow.now() - began
        self._reports[case.id] = report.model_copy(
            update={"duration_ms": int(elapsed.total_seconds() * 1000)}
        )
        self._running -= 1

    async def _session(self, session_id: str, spec: AgentSpec, message: str) -> AgentResult:
        one_shot = spec.session.model_copy(update={"end_after_reply": True})
        handle = await workflow.start_child_workflow(
            WORKFLOW_NAME,
            AgentInput(spec=spec.model_copy(update={"session": one_shot}), message=message),
            id=session_id,
            result_type=AgentResult,
            static_summary=f"eval case {session_id}",
        )
        if self._request.approvals != "person":
            retired(EVAL_APPROVALS_PATCH)  # the previous release's evaluations asked it here
            await self._answer_approvals(session_id, handle)
        result: AgentResult = await handle
        self._tokens += result.usage.prompt_tokens + result.usage.completion_tokens
        cost = _cost(result)
        if cost is not None:
            self._cost = (self._cost or 0.0) + cost
        return result

    async def _answer_approvals(
        self, session_id: str, handle: workflow.ChildWorkflowHandle[Any, AgentResult]
    ) -> None:
        """Until the case's session ends, answer its waiting calls by the policy."""
        policy, answered = self._request.approvals, set()

        def asked() -> list[PendingApproval]:
            return [p for p in self._asked.get(session_id, []) if p.approval_id not in answered]

        while True:
            await workflow.wait_condition(lambda: handle.done() or bool(asked()))
            if handle.done():
                return
            waiting = asked()
            if policy == "fail":
                calls = ", ".join(f"{p.tool_name} {p.arguments}" for p in waiting)
                self._failed_by_policy[session_id] = (
                    f"a call waited for a person ({calls}), and the evaluation's approvals "
                    "policy is 'fail' (give approvals='approve', 'deny' or 'person')"
                )
                handle.cancel()
                return
            verb = "approve" if policy == "approve" else "deny"
            for pending in waiting:
                answered.add(pending.approval_id)
                decision = ApprovalSignal(
                    approval_id=pending.approval_id,
                    by=self._request.approver,
                    reason=f"the evaluation's approvals policy: {policy}",
                )
                await handle.signal(verb, decision)

    async def _judged(self, case: EvalCase, scored: CaseScored) -> Score:
        judge = self._request.judge
        if judge is None:
            return Score(name="judge", score=0.0, reason="no judge was given for criteria")
        spec = judge.model_copy(
            update={
                "output_schema": JUDGE_SCHEMA,
                "instructions": judge.instructions or JUDGE_INSTRUCTIONS,
            }
        )
        session_id = f"{workflow.info().workflow_id}--{case.id}--judge"
        try:
            result = await self._session(session_id, spec, judge_request(case, scored.facts))
        except ChildWorkflowError as error:
            return Score(name="judge", score=0.0, reason=f"the judge failed: {_why(error)}")
        return judge_score(result.structured_output)

    def _spent(self) -> bool:
        request = self._request
        over_tokens = request.max_total_tokens is not None and (
            self._tokens >= request.max_total_tokens
        )
        over_cost = request.max_cost_usd is not None and (self._cost or 0) >= request.max_cost_usd
        return over_tokens or over_cost


def _cost(result: AgentResult) -> float | None:
    costs = [s.cost_usd for s in result.spend.values() if s.cost_usd is not None]
    return sum(costs) if costs else None


def _why(error: ChildWorkflowError) -> str:
    return str(error.cause) if error.cause is not None else str(error)
