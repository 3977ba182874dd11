"""The client's approval doors. A decision is first checked against the session as it
is now (the ``decision_problem`` query: what the ``decide`` update's validator says),
so a caller learns at once why one cannot apply; then it is sent as a signal, which is
never lost, even while the session continues as new. A signed decision's token is
checked by the workers after that: one they refuse changes nothing and is listed in
``status.rejected_signals``, and an approval's record says ``verified`` when it counted.

With an ``ApproverKey`` a decision is signed; without one its ``by`` is a name as typed,
which a session with an allow-list may refuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from durable_agent.core import (
    AgentResult,
    ApprovalPolicyView,
    ApproverKey,
    ArgumentTest,
    DecisionKind,
    DecisionRequest,
    DecisionResult,
    DurableAgentError,
    PendingApproval,
    RevokeGrantSignal,
    decision_digest,
    parse_test,
)


class DecisionRefusedError(DurableAgentError, ValueError):
    """The session refused a decision and changed nothing; the text says why."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id!r} refused: {reason}")
        self.session_id = session_id
        self.reason = reason


class UnknownApprovalError(DurableAgentError, LookupError):
    def __init__(self, session_id: str, approval_id: str, pending: Sequence[str]) -> None:
        waiting = ", ".join(pending) if pending else "none"
        super().__init__(
            f"session {session_id!r} has no pending approval {approval_id!r} (pending: {waiting})"
        )
        self.approval_id = approval_id


Tests = Sequence[ArgumentTest | str]
"""Argument tests for an "always" approval: ``ArgumentTest``s or ``"$.amount <= 100"``."""


class ApprovalDoors:
    """Mixed into ``AgentClient``."""

    approver_key: ApproverKey | None

    def _handle(self, session_id: str) -> WorkflowHandle[Any, AgentResult]:
        raise NotImplementedError

    @staticmethod
    def _translate(session_id: str, error: RPCError) -> Exception:
        raise NotImplementedError

    async def pending_approvals(self, session_id: str) -> list[PendingApproval]:
        raise NotImplementedError

    async def _query(self, session_id: str, name: str, result_type: Any, *args: Any) -> Any:
        raise NotImplementedError

    async def approve(
        self,
        session_id: str,
        approval_id: str,
        *,
        by: str | None = None,
        reason: str | None = None,
        arguments: dict[str, Any] | None = None,
        always: Literal["tool", "matching"] | None = None,
        matching: Tests = (),
        key: ApproverKey | None = None,
    ) -> DecisionResult:
        """Run the call: as the model asked, or with ``arguments`` (checked against the
        tool's schema first). ``always``: approve later calls of this tool too (all, or
        those passing ``matching``) for the rest of the session."""
        tests = [t if isinstance(t, ArgumentTest) else parse_test(t) for t in matching]
        if tests and always is None:
            always = "matching"
        extra = {"arguments": arguments, "always": always, "matching": tests}
        return await self._decide(session_id, "approve", approval_id, by, reason, key, extra)

    async def deny(
        self,
        session_id: str,
        approval_id: str,
        *,
        by: str | None = None,
        reason: str | None = None,
        key: ApproverKey | None = None,
    ) -> DecisionResult:
        """Refuse the call; the model reads ``reason``."""
        return await self._decide(session_id, "deny", approval_id, by, reason, key, {})

    async def respond(
        self,
        session_id: str,
        approval_id: str,
        content: str,
        *,
        is_error: bool = False,
        by: str | None = None,
        reason: str | None = None,
        key: ApproverKey | None = None,
    ) -> DecisionResult:
        """Answer in the tool's place: ``content`` is the call's result; the tool does
        not run."""
        extra = {"content": content, "is_error": is_error}
        return await self._decide(session_id, "respond", approval_id, by, reason, key, extra)

    async def revoke_grant(
        self,
        session_id: str,
        grant_id: str,
        *,
        by: str | None = None,
        key: ApproverKey | None = None,
    ) -> DecisionResult:
        """Take back an "always" approval: later calls are asked about again."""
        by, token = await self._signature(session_id, grant_id, "revoke", by, key)
        request = RevokeGrantSignal(grant_id=grant_id, by=by, token=token)
        problem = await self._query(session_id, "revoke_problem", str | None, request)
        if problem is not None:
            raise DecisionRefusedError(session_id, problem)
        await self._signal(session_id, "revoke_grant", request)
        return DecisionResult(approval_id=grant_id, decision="revoke", by=request.by)

    async def approval_policy(self, session_id: str) -> ApprovalPolicyView:
        """The session's rules, approvers and standing grants."""
        view: ApprovalPolicyView = await self._query(
            session_id, "approval_policy", ApprovalPolicyView
        )
        return view

    async def _decide(
        self,
        session_id: str,
        kind: DecisionKind,
        approval_id: str,
        by: str | None,
        reason: str | None,
        key: ApproverKey | None,
        extra: dict[str, Any],
    ) -> DecisionResult:
        request = DecisionRequest(
            decision=kind, approval_id=approval_id, by=by, reason=reason, **extra
        )
        by, token = await self._signature(session_id, approval_id, kind, by, key, request)
        request = request.model_copy(update={"by": by, "token": token})
        problem = await self._query(session_id, "decision_problem", str | None, request)
        if problem is not None:
            if problem.endswith("no pending approval has this id"):
                pending = [p.approval_id for p in await self.pending_approvals(session_id)]
                raise UnknownApprovalError(session_id, approval_id, pending)
            raise DecisionRefusedError(session_id, problem)
        await self._signal(session_id, kind, request.as_signal())
        return DecisionResult(approval_id=approval_id, decision=kind, by=request.by)

    async def _signature(
        self,
        session_id: str,
        subject: str,
        action: str,
        by: str | None,
        key: ApproverKey | None,
        decision: DecisionRequest | None = None,
    ) -> tuple[str | None, str | None]:
        """Who decides, and the token proving it: a key (this call's, else the client's)
        names its holder and signs the whole decision, the call as it waits and the
        session's run chain; without one ``by`` is as typed, unsigned."""
        key = key or self.approver_key
        if key is None:
            return by, None
        call = None
        if decision is not None:
            pending = await self.pending_approvals(session_id)
            call = next((p for p in pending if p.approval_id == subject), None)
        signal = decision.as_signal() if decision is not None else None
        digest = decision_digest(action, subject, await self.run_chain(session_id), call, signal)
        return key.name, key.sign(session_id, subject, action, digest=digest)

    async def run_chain(self, session_id: str) -> str:
        """The session's first run id: the same across continue-as-new, new for a new
        session under the same id (what signed decisions are bound to)."""
        try:
            described = await self._handle(session_id).describe()
        except RPCError as error:
            raise self._translate(session_id, error) from None
        info = described.raw_description.workflow_execution_info
        return info.first_run_id or described.run_id or ""

    async def _signal(self, session_id: str, name: str, payload: Any) -> None:
        raise NotImplementedError
