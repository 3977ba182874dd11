"""What a signed decision is signed for: a digest of the whole decision and of the call
it decides, in the workflow run that asked for it.

A token that named only the session, the approval id and the action let anything else
ride along unsigned: edited arguments, an "always" scope, a response's content, or the
same approval id in a new session started under the same id, in the next agent run
inline in the same workflow, or after a reset. The digest covers each of those, so a
token is worth exactly the decision its signer saw. Pure: the workflow computes it for
the workers to compare, the client for the signer to sign.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from durable_agent._contracts._approval_contracts import ApprovalSignal, PendingApproval

#: The fields of a decision its signer vouches for (``by`` comes from the token itself).
DECIDED_FIELDS = {"reason", "arguments", "always", "matching", "content", "is_error"}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def decision_digest(
    action: str,
    subject: str,
    run: str,
    call: PendingApproval | None = None,
    decision: ApprovalSignal | None = None,
) -> str:
    """The digest a token for ``action`` on ``subject`` (an approval or grant id) signs:
    the decision's content (why, edited arguments, scope and its tests, a response and
    whether it is an error), the call's tool and arguments, and the run it was asked
    in: the call's own ``run`` when it names one, else ``run`` (the session's first run
    id, the same across continue-as-new and new for a new session; what a grant's
    revocation is bound to)."""
    if call is not None and call.run:
        run = call.run
    content: dict[str, Any] = {}
    if decision is not None:
        content = decision.model_dump(
            mode="json",
            include={"reason", "arguments", "always", "matching", "content", "is_error"},
        )
    body = {
        "action": action,
        "subject": subject,
        "run": run,
        "decision": content,
        "call": None
        if call is None
        else {"tool": call.tool_name, "arguments": _sha256(call.arguments)},
    }
    return _sha256(json.dumps(body, sort_keys=True, separators=(",", ":")))
