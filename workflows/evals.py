"""EvalWorkflow: a dataset of cases run as durable work.

Each case is a one-shot child session of the agent under test, at most
``concurrency`` at once; when it ends, the ``score_case`` activity reads it back and
scores it, and a case with ``criteria`` is judged by a second child session (the
judge's model call is an activity like any other). A case starts only while the
budget has room. The run survives a lost worker as any workflow does: finished cases
are in its history and never run again, running ones are sessions of their own.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from durable_agent.core import (
        EVAL_WORKFLOW,
        JUDGE_SCHEMA,
        WORKFLOW_NAME,
        AgentInput,
        AgentResult,
        AgentSpec,
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

    from .retries import LOST_WORK_RETRIES

JUDGE_INSTRUCTIONS = "You judge an agent's answer against a rubric, strictly and briefly."


@workflow.defn(name=EVAL_WORKFLOW, sandboxed=False)  # see durable_agent.temporal._sandbox
class EvalWorkflow:
    @workflow.init
    def __init__(self, request: EvalInput) -> None:
        self._request = request
        self._reports: dict[str, CaseReport] = {}
        self._running = 0
        self._tokens = 0
        self._cost: float | None = None

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

    @workflow.query(name="report")
    def report(self, done: bool = False) -> EvalReport:
        order = [c.id for c in self._request.cases]
        return EvalReport(
            eval_id=workflow.info().workflow_id,
            agent=self._request.agent,
            done=done,
            cases=[self._reports[i] for i in order if i in self._reports],
            tokens=self._tokens,
            cost_usd=self._cost,
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
            report = CaseReport(
                id=case.id, status="failed", session_id=session_id, error=_why(error)
            )
        elapsed = workflow.now() - began
        self._reports[case.id] = report.model_copy(
            update={"duration_ms": int(elapsed.total_seconds() * 1000)}
        )
        self._running -= 1

    async def _session(self, session_id: str, spec: AgentSpec, message: str) -> AgentResult:
        one_shot = spec.session.model_copy(update={"end_after_reply": True})
        result: AgentResult = await workflow.execute_child_workflow(
            WORKFLOW_NAME,
            AgentInput(spec=spec.model_copy(update={"session": one_shot}), message=message),
            id=session_id,
            result_type=AgentResult,
            static_summary=f"eval case {session_id}",
        )
        self._tokens += result.usage.prompt_tokens + result.usage.completion_tokens
        cost = _cost(result)
        if cost is not None:
            self._cost = (self._cost or 0.0) + cost
        return result

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
