"""What a test's approver may answer for a waiting call, in the words every other entry
takes (``SessionHandle.approve``, ``DecisionRequest``, the CLI's commands, the
gateway's routes): ``"approve"``, ``"deny"``, a whole ``DecisionRequest`` (an edit, a
response in the tool's place, an "always"), or ``None`` (nobody decides).

The approvals' records say what happened in the past tense (``"approved"``); a test
that answers with those words is told the word to give instead, here, before anything
reaches the session."""

from __future__ import annotations

from typing import Literal

from durable_agent._contracts._approval_contracts import DecisionRequest, PendingApproval
from durable_agent._errors import DurableAgentError

Verdict = Literal["approve", "deny"]
Answer = Verdict | DecisionRequest | None
"""What an approver answers for one waiting call."""

#: The words of an approval's record, and the word a caller gives for each.
_RECORDED = {"approved": "approve", "denied": "deny", "responded": "respond"}


class ApproverAnswerError(DurableAgentError, ValueError):
    """A test's approver answered what no decision is; the text names what to answer."""


def decision_of(answer: object, pending: PendingApproval) -> DecisionRequest | None:
    """The decision ``answer`` gives for ``pending`` (``None``: nobody decides);
    ``ApproverAnswerError`` saying what to answer instead."""
    call = f"{pending.tool_name} ({pending.approval_id})"
    if answer is None:
        return None
    if isinstance(answer, DecisionRequest):
        if answer.approval_id != pending.approval_id:
            raise ApproverAnswerError(
                f"the approver answered {pending.approval_id!r} with a decision for "
                f"{answer.approval_id!r}: give DecisionRequest(approval_id="
                "pending.approval_id, ...)"
            )
        return answer
    if answer in ("approve", "deny"):
        return DecisionRequest(approval_id=pending.approval_id, decision=answer)
    if answer == "respond":
        raise ApproverAnswerError(
            f"the approver answered 'respond' for {call} without the call's result: return "
            "DecisionRequest(approval_id=pending.approval_id, decision='respond', content=...)"
        )
    if isinstance(answer, str) and answer in _RECORDED:
        raise ApproverAnswerError(
            f"the approver answered {answer!r} for {call}: answer {_RECORDED[answer]!r} "
            f"(decisions are given as 'approve', 'deny' or a DecisionRequest; {answer!r} "
            "is how the approval's record tells it afterwards)"
        )
    raise ApproverAnswerError(
        f"the approver answered {answer!r} for {call}: answer 'approve', 'deny', a "
        "DecisionRequest, or None (nobody decides)"
    )
