"""Evaluations from the client: start one, read its report (while it runs, or once it
is over)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from temporalio.client import Client, WorkflowExecutionStatus

from durable_agent._contracts.evals import (
    EVAL_WORKFLOW,
    EvalApprovals,
    EvalCase,
    EvalInput,
    EvalReport,
)
from durable_agent._payloads.storage import check_fits

from .results import Connection, SpecLike, parse_spec


class Evals:
    """``AgentClient.evals``: evaluations of a spec over cases."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.temporal: Client = connection.temporal

    async def start(
        self,
        spec: SpecLike,
        cases: Sequence[EvalCase],
        *,
        agent: str = "",
        concurrency: int = 4,
        max_total_tokens: int | None = None,
        max_cost_usd: float | None = None,
        judge: SpecLike | None = None,
        eval_id: str | None = None,
        approvals: EvalApprovals = "fail",
        approver: str = "eval",
    ) -> str:
        """Start an evaluation of ``spec`` (an ``Agent`` or a spec) over ``cases`` and
        return its id: each case a one-shot session (``<eval id>--<case id>``), scored
        when it ends; ``judge`` (an ``Agent`` or a spec) answers cases with ``criteria``.
        ``approvals``: what a case's call that waits for a person gets (``fail`` the
        case, ``deny`` or ``approve`` it as ``approver``, or leave it to a ``person``).
        ``ValueError`` for a case with criteria and no judge, before anything starts."""
        if judge is None and (missing := [c.id for c in cases if c.criteria is not None]):
            raise ValueError(f"cases {', '.join(missing)} have criteria: give a judge")
        request = EvalInput(
            spec=parse_spec(spec),
            cases=list(cases),
            agent=agent,
            concurrency=concurrency,
            max_total_tokens=max_total_tokens,
            max_cost_usd=max_cost_usd,
            judge=parse_spec(judge) if judge is not None else None,
            approvals=approvals,
            approver=approver,
        )
        check_fits(self.temporal.data_converter, request, "the evaluation's start")
        eval_id = eval_id or f"eval-{uuid.uuid4().hex[:10]}"
        await self.temporal.start_workflow(
            EVAL_WORKFLOW, request, id=eval_id, task_queue=self._connection.task_queue
        )
        return eval_id

    async def report(self, eval_id: str, *, wait: bool = False) -> EvalReport:
        """The evaluation's report: as far as it got (``done`` false), or, once it is
        over (or with ``wait``, when it is), the whole."""
        handle = self.temporal.get_workflow_handle(eval_id, result_type=EvalReport)
        report: EvalReport
        if wait or (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED:
            report = await handle.result()
        else:
            report = await handle.query("report", result_type=EvalReport)
        return report
