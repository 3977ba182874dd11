"""Every door a person's decision comes through: signals (``approve``, ``deny``,
``respond``, ``revoke_grant``: the ``temporal`` CLI's way, rejected visibly in
``status`` when they change nothing) and updates (``decide``, ``revoke``: the caller
learns at once whether it was accepted, and why not). All of them only record into
the Session; a signed decision waits for the main loop to have its token checked."""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from durable_agent.core import (
        ApprovalPolicyView,
        ApprovalSignal,
        DecisionRequest,
        DecisionResult,
        RecordedDecision,
        RevokeGrantSignal,
    )
    from durable_agent.session import RECORDED_DECISIONS, Session

    from .inputs import InvalidInput, decode
    from .live_feed import LiveFeed
    from .session_log import warn

#: Error type of a decision an update refused (the message says why).
DECISION_REFUSED = "DecisionRefused"


class ApprovalHandlers:
    _session: Session
    _feed: LiveFeed

    def _rejected(self, text: str | None) -> None:
        if text is not None:
            warn(self._session, "signal changed nothing: %s", text)

    @workflow.signal
    def approve(self, raw: RawValue) -> None:
        self._record_decision(raw, "approved")

    @workflow.signal
    def deny(self, raw: RawValue) -> None:
        self._record_decision(raw, "denied")

    @workflow.signal
    def respond(self, raw: RawValue) -> None:
        """A person gives the call's result; the tool does not run."""
        self._record_decision(raw, "responded")

    def _record_decision(self, raw: RawValue, decision: RecordedDecision) -> None:
        try:
            signal: ApprovalSignal = decode(raw, ApprovalSignal)
        except InvalidInput as error:
            self._rejected(
                self._session.requests.reject(f"{decision}: unreadable signal ({error})")
            )
            return
        self._rejected(self._session.decisions.decision_arrived(signal, decision, workflow.now()))
        self._feed.observe()  # readers see the decision now, not when the batch is decided

    @workflow.signal
    def revoke_grant(self, raw: RawValue) -> None:
        try:
            signal: RevokeGrantSignal = decode(raw, RevokeGrantSignal)
        except InvalidInput as error:
            self._rejected(
                self._session.requests.reject(f"revoke_grant: unreadable signal ({error})")
            )
            return
        self._rejected(self._session.decisions.revoke_requested(signal))

    @workflow.update
    async def decide(self, request: DecisionRequest) -> DecisionResult:
        """Approve, deny or respond, answered at once: accepted (with who decided, and
        whether a token proved it) or refused with the reason, changing nothing."""
        key = workflow.current_update_info().id  # type: ignore[union-attr]
        signal = request.as_signal()
        recorded = RECORDED_DECISIONS[request.decision]
        self._session.decisions.decision_arrived(signal, recorded, workflow.now(), key=key)
        self._feed.observe()
        return await self._outcome(key)

    @decide.validator
    def _decision_acceptable(self, request: DecisionRequest) -> None:
        signal = request.as_signal()
        problem = self._session.decisions.decision_problem(
            signal, RECORDED_DECISIONS[request.decision]
        )
        if problem is not None:
            raise ValueError(problem)

    @workflow.update
    async def revoke(self, request: RevokeGrantSignal) -> DecisionResult:
        """Take back a standing grant, answered at once."""
        key = workflow.current_update_info().id  # type: ignore[union-attr]
        self._session.decisions.revoke_requested(request, key=key)
        return await self._outcome(key)

    @revoke.validator
    def _revoke_acceptable(self, request: RevokeGrantSignal) -> None:
        problem = self._session.decisions.revoke_problem(request)
        if problem is not None:
            raise ValueError(problem)

    async def _outcome(self, key: str) -> DecisionResult:
        await workflow.wait_condition(lambda: key in self._session.decisions.outcomes)
        outcome = self._session.decisions.outcomes.pop(key)
        if isinstance(outcome, str):
            raise ApplicationError(outcome, type=DECISION_REFUSED, non_retryable=True)
        return outcome

    @workflow.query
    def decision_problem(self, request: DecisionRequest) -> str | None:
        """Why a decision would change nothing now (``None``: it would be taken): what
        the ``decide`` update's validator says, for clients that decide by signal."""
        signal = request.as_signal()
        return self._session.decisions.decision_problem(
            signal, RECORDED_DECISIONS[request.decision]
        )

    @workflow.query
    def revoke_problem(self, request: RevokeGrantSignal) -> str | None:
        return self._session.decisions.revoke_problem(request)

    @workflow.query
    def approval_policy(self) -> ApprovalPolicyView:
        """The spec's rules and approvers, each tool's approvers, and standing grants."""
        session = self._session
        tools = {
            name: tool.policy.approvers
            for name, tool in session.active_tools.items()
            if tool.policy.approvers is not None
        }
        return ApprovalPolicyView(
            settings=session.spec.approvals, tool_approvers=tools, grants=session.state.grants
        )
