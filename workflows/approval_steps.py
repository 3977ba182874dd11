"""Carrying out the gate's activities: predicates, descriptions of waiting calls,
signed decisions checked by the workers, and escalations told to a second group."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._contracts._approval_contracts import (
        ApprovalCheckInput,
        DescribeCallsInput,
        TokenVerdict,
    )
    from durable_agent._session import CheckApprovals, DescribeCalls, NotifyEscalation, VerifyTokens
    from durable_agent._spec._spec import SessionRules

    from .retries import LOST_WORK_RETRIES


async def _run(name: str, arg: Any, result_type: Any, rules: SessionRules, summary: str) -> Any:
    return await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=timedelta(seconds=30),
        heartbeat_timeout=timedelta(seconds=rules.heartbeat_timeout_seconds),
        retry_policy=LOST_WORK_RETRIES,
        summary=summary,
    )


async def check_approvals(command: CheckApprovals, rules: SessionRules) -> list[bool]:
    """The predicates' answers (the tools' own, or the rules' named ones)."""
    pairs = [(c.function.name, c.function.arguments) for c in command.calls]
    request = ApprovalCheckInput(calls=pairs, predicates=command.predicates)
    summary = f"check_approvals {len(pairs)} calls"
    verdicts: list[bool] = await _run("check_approvals", request, list[bool], rules, summary)
    return verdicts


async def describe_calls(command: DescribeCalls, rules: SessionRules) -> list[str]:
    pairs = [(c.function.name, c.function.arguments) for c in command.calls]
    summary = f"describe_calls {len(pairs)} calls"
    request = DescribeCallsInput(calls=pairs)
    described: list[str] = await _run("describe_calls", request, list[str], rules, summary)
    return described


async def verify_tokens(command: VerifyTokens, rules: SessionRules) -> list[TokenVerdict]:
    summary = f"verify_approver_tokens {', '.join(c.subject for c in command.checks)}"
    name, kind = "verify_approver_tokens", list[TokenVerdict]
    verdicts: list[TokenVerdict] = await _run(name, command.checks, kind, rules, summary)
    return verdicts


async def notify_escalation(command: NotifyEscalation, rules: SessionRules) -> None:
    notice = command.notice
    ids = ", ".join(p.approval_id for p in notice.approvals)
    summary = f"notify_escalation {ids} to {', '.join(notice.notify)}"
    await _run("notify_escalation", notice, None, rules, summary)
