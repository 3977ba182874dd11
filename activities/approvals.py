"""The gate's activities: predicates asked once per batch, the tools' readable forms
of calls that wait, signed decisions checked with keys only the workers hold, and a
second group told of calls escalated to them."""

from __future__ import annotations

import inspect

import structlog
from temporalio import activity

from durable_agent._contracts.approvals import (
    ApprovalCheckInput,
    ApproverKeys,
    DescribeCallsInput,
    EscalationNotice,
    TokenCheck,
    TokenVerdict,
)
from durable_agent._spec.tools import ToolArgumentsError
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import visible

from .running import heartbeats

log = structlog.get_logger("durable_agent.approvals")

#: The most of a tool's own description of a call an approver is shown; past it the
#: text says how much was left out (every screen shows the whole call beside it).
MAX_DESCRIPTION_CHARS = 500


def shortened(text: str) -> str:
    """``text`` as an approver reads it: whole, or cut with a marker saying so."""
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text
    left = len(text) - MAX_DESCRIPTION_CHARS
    return (
        f"{text[:MAX_DESCRIPTION_CHARS]} [... {left} more characters not shown; "
        "the call's arguments are shown whole]"
    )


def answer_predicates(registry: Registry, request: ApprovalCheckInput) -> list[bool]:
    """Each call's predicate over its validated arguments: the tool's own (does it need
    a person?) or a rule's named one (does the rule apply?). Calls with unusable
    arguments need nobody, and match no named predicate: they will not run."""
    predicates = request.predicates or [None] * len(request.calls)
    answers = []
    for (name, arguments), predicate in zip(request.calls, predicates, strict=True):
        found = registry.get(name)
        try:
            validated = found.validate_arguments(arguments, {}) if found is not None else None
        except ToolArgumentsError:
            answers.append(False)
            continue
        if predicate is not None:
            named = registry.hook(predicate)
            if named is None:
                raise LookupError(f"no approval predicate {predicate!r} is loaded here")
            answers.append(bool(named(name, validated or {})))
        elif found is None or found.predicate is None or validated is None:
            answers.append(True)  # cannot judge here: ask a person
        else:
            answers.append(bool(found.predicate(validated)))
    return answers


def describe_calls(registry: Registry, request: DescribeCallsInput) -> list[str]:
    """Each waiting call in its tool's own words (``@tool(describe=...)``); "" where the
    tool cannot say (the session shows the default form)."""
    described = []
    for name, arguments in request.calls:
        found = registry.get(name)
        text = ""
        if found is not None and found.describe is not None:
            try:
                text = str(found.describe(found.validate_arguments(arguments, {})))
            except Exception as error:  # a describer's bug must not hold the approval
                log.warning("describe failed", tool=name, error=str(error))
        described.append(shortened(visible(text)))  # as an approver will read it
    return described


def check_tokens(
    keys: ApproverKeys, session_id: str, checks: list[TokenCheck]
) -> list[TokenVerdict]:
    """Who signed each of ``session_id``'s decisions, or why it counts for nothing."""
    verdicts = []
    for check in checks:
        try:
            who = keys.verify(check.token, session_id, check.subject, check.action, check.digest)
            verdicts.append(TokenVerdict(approver=who))
        except ValueError as error:
            log.warning("token refused", subject=check.subject, error=str(error))
            verdicts.append(TokenVerdict(error=str(error)))
    return verdicts


class ApprovalActivities:
    def __init__(self, registry: Registry | None = None, keys: ApproverKeys | None = None) -> None:
        self._registry = registry if registry is not None else Registry()
        self._keys = ApproverKeys.from_env() if keys is None else keys

    @activity.defn(name="check_approvals")
    @heartbeats
    async def check_approvals(self, request: ApprovalCheckInput) -> list[bool]:
        return answer_predicates(self._registry, request)

    @activity.defn(name="describe_calls")
    @heartbeats
    async def describe_calls(self, request: DescribeCallsInput) -> list[str]:
        return describe_calls(self._registry, request)

    @activity.defn(name="verify_approver_tokens")
    @heartbeats
    async def verify_approver_tokens(self, checks: list[TokenCheck]) -> list[TokenVerdict]:
        """Who signed each decision (with the keys this worker holds), or why it counts
        for nothing. The session the token must be for is the workflow asking."""
        return check_tokens(self._keys, activity.info().workflow_id or "", checks)

    @activity.defn(name="notify_escalation")
    @heartbeats
    async def notify_escalation(self, notice: EscalationNotice) -> None:
        """Tell the second group (the spec's notifier, if any; always a log line)."""
        notice = notice.model_copy(update={"session_id": activity.info().workflow_id or ""})
        ids = [p.approval_id for p in notice.approvals]
        log.warning("approvals escalated", session_id=notice.session_id, to=notice.notify, ids=ids)
        if notice.notifier is None:
            return
        notifier = self._registry.hook(notice.notifier)
        if notifier is None:
            raise LookupError(f"no escalation notifier {notice.notifier!r} is loaded here")
        outcome = notifier(notice)
        if inspect.isawaitable(outcome):
            await outcome
