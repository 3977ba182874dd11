"""The approval gate's rules, pure: which calls run, which are refused and which wait
for a person (spec rules first, then the tool's policy, then standing grants), and
whether a person's decision may change anything (who sent it, what it asks).

The Session asks it once per batch and once per decision; the state it keeps (grants,
decisions waiting for their token to be checked) is in ``SessionState``.

Also here: a call's arguments as the tool will receive them (coerced by its schema), for
the rules to judge; and the results the loop writes itself for calls that did not run as
asked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from jsonschema import Draft202012Validator

from durable_agent._contracts.approvals import ApprovalSignal, DecisionKind, Grant, PendingApproval
from durable_agent._contracts.boundary import (
    CancelTurnSignal,
    EndSessionSignal,
    GuardrailVerdict,
    ResolvedTool,
)
from durable_agent._spec.approval_policy import (
    ApprovalRule,
    ApprovalSettings,
    tests_hold,
    tests_verdict,
)
from durable_agent._wire.codecs import wire_parameters
from durable_agent._wire.messages import ApprovalRecord, RecordedDecision, ToolCall, ToolMessage

from .state import GateState

# Arguments as the tool will receive them, for the rules that judge a call.
#
# A tool's arguments are validated by pydantic in lax mode, so ``{"amount": "5000"}``
# reaches the tool as ``5000``. A rule that compared the model's raw JSON would let that
# call past ``deny when $.amount > 1000``. Pure: the gate coerces the raw arguments by
# the tool's JSON Schema the way the validation will (numbers and booleans written as
# strings, integral floats), and leaves anything else as it is.

_TRUE = {"true", "1", "yes", "on", "t", "y"}
_FALSE = {"false", "0", "no", "off", "f", "n"}


def as_validated(value: Any, schema: dict[str, Any] | None) -> Any:
    """``value`` coerced as lax validation against ``schema`` would coerce it."""
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if kind == "object" and isinstance(value, dict):
        properties = schema.get("properties") or {}
        return {k: as_validated(v, properties.get(k)) for k, v in value.items()}
    if kind == "array" and isinstance(value, list):
        return [as_validated(v, schema.get("items")) for v in value]
    if kind == "integer":
        return _integer(value)
    if kind == "number":
        return _number(value)
    if kind == "boolean" and isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    return value


def _integer(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            number = _number(value)
            return int(number) if isinstance(number, float) and number.is_integer() else value
    return value


def _number(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return value
    return value


Question = tuple[int, str | None]
"""(slot, predicate): a rule's named predicate, or ``None`` for the tool's own."""
Verdicts = dict[Question, bool]

RECORDED_DECISIONS: dict[DecisionKind, RecordedDecision] = {
    "approve": "approved",
    "deny": "denied",
    "respond": "responded",
}


@dataclass(frozen=True)
class GateOutcome:
    action: Literal["run", "deny", "ask"]
    rule: str | None = None
    """The spec's rule that decided (``None``: the tool's policy)."""
    reason: str | None = None
    """Why it is refused (a ``deny``)."""
    grant: Grant | None = None
    """The standing grant that approved it (a ``run`` instead of an ``ask``)."""


#: The tool's policy alone decided (most calls): one outcome each, shared (frozen).
_RUN, _ASK = GateOutcome("run"), GateOutcome("ask")

DECISION_KINDS: dict[RecordedDecision, DecisionKind] = {v: k for k, v in RECORDED_DECISIONS.items()}


def arguments_of(arguments: str) -> Any:
    """A call's raw JSON arguments as data (``None`` when they are not JSON)."""
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return None


def judged_arguments(call: ToolCall, tool: ResolvedTool) -> Any:
    """The call's arguments as the tool will receive them (``as_validated``)."""
    return as_validated(arguments_of(call.function.arguments), tool.definition.parameters)


class _JudgedOnce:
    """``judged_arguments``, worked out on first use (most calls meet no rule and no
    grant: a batch of 2,500 then validates nothing twice in one workflow task). A plain
    holder: a ``functools.cache`` per call cost more than the rest of the gate."""

    __slots__ = ("_call", "_known", "_tool", "_value")

    def __init__(self, call: ToolCall, tool: ResolvedTool) -> None:
        self._call, self._tool = call, tool
        self._value: Any = None
        self._known = False

    def __call__(self) -> Any:
        if not self._known:
            self._value, self._known = judged_arguments(self._call, self._tool), True
        return self._value


def rule_applies(rule: ApprovalRule, tool: ResolvedTool) -> bool:
    """Over a tool the worker's owner gates, a spec's rule may deny or ask, never let a
    call run: the owner's floor is below the session's rules."""
    return tool.floor is None or rule.action != "allow"


def rule_matches(rule: ApprovalRule, arguments: Any) -> bool:
    """A rule's tests against the arguments; one that cannot be judged (a type the
    test cannot compare) matches a rule that refuses or asks, never one that allows."""
    verdict = tests_verdict(rule.when, arguments)
    return verdict is True or (verdict is None and rule.action != "allow")


class Gate:
    def __init__(self, settings: ApprovalSettings, state: GateState) -> None:
        self.settings = settings
        self.state = state

    # --- a batch ---------------------------------------------------------------------------

    def runs_unjudged(self, tool: ResolvedTool) -> bool:
        """Every call of ``tool`` runs, whatever its arguments: no rule to test, no
        predicate to ask, no person to wait for (its calls need no question and no
        decision). A tool whose output comes from outside never runs: its calls wait."""
        policy = tool.policy
        return not self.settings.rules and policy.approval == "never" and not policy.external_output

    def questions(self, slot: int, call: ToolCall, tool: ResolvedTool) -> list[Question]:
        """The predicates to ask before ``decide`` can: the rules' named predicates up to
        the first rule that matches without one, and the tool's own when no rule may."""
        if not self.settings.rules:
            return [(slot, None)] if tool.policy.approval == "predicate" else []
        arguments = _JudgedOnce(call, tool)  # judged only if a rule is for this tool
        asked: list[Question] = []
        for rule in self.settings.rules:
            if not rule.for_tool(call.function.name) or not rule_applies(rule, tool):
                continue
            if not rule_matches(rule, arguments()):
                continue
            if rule.predicate is None:
                return asked
            asked.append((slot, rule.predicate))
        if tool.policy.approval == "predicate":
            asked.append((slot, None))
        return asked

    def decide(
        self, slot: int, call: ToolCall, tool: ResolvedTool, verdicts: Verdicts
    ) -> GateOutcome:
        """First matching rule wins; else the tool's policy. A call that would wait for a
        person runs when a standing grant covers it."""
        if self.runs_unjudged(tool):
            return _RUN  # (most calls: nothing to judge, in a batch of thousands)
        if tool.floor is not None and tool.policy.approval == "deny":
            return GateOutcome("deny", reason=tool.policy.deny_reason)  # the owner's word
        arguments = _JudgedOnce(call, tool)
        outcome: GateOutcome | None = None
        for index, rule in enumerate(self.settings.rules):
            if not rule.for_tool(call.function.name) or not rule_applies(rule, tool):
                continue
            if not rule_matches(rule, arguments()):
                continue
            if rule.predicate is not None and not verdicts.get((slot, rule.predicate), False):
                continue
            name = self.settings.rule_name(index)
            action = rule.action
            reason = rule.reason or f"refused by the session's rule {name!r}"
            outcome = GateOutcome("run" if action == "allow" else action, name, reason)
            break
        if outcome is None:
            approval = tool.policy.approval
            if approval == "deny":
                outcome = GateOutcome("deny", reason=tool.policy.deny_reason)
            elif approval == "always" or (
                approval == "predicate" and verdicts.get((slot, None), True)
            ):
                outcome = _ASK
            else:
                outcome = _RUN
        if tool.policy.external_output:  # nothing runs: the call waits for its output
            return _ASK if outcome.action == "run" else outcome
        if outcome.action == "ask" and self.state.grants:
            grant = self.grant_for(call.function.name, arguments)
            if grant is not None:
                return GateOutcome("run", outcome.rule, grant=grant)
        return outcome

    @staticmethod
    def granted(grant: Grant, at: datetime, rule: str | None) -> ApprovalRecord:
        """The record of a call a standing grant approved."""
        return ApprovalRecord(
            decision="approved",
            by=grant.by,
            at=at,
            scope="matching" if grant.matching else "tool",
            grant=grant.grant_id,
            rule=rule,
            verified=grant.verified or None,
        )

    def grant_for(self, tool: str, arguments: Callable[[], Any]) -> Grant | None:
        """The first grant covering a call of ``tool`` (its arguments judged only for a
        grant with tests)."""
        return next(
            (
                g
                for g in self.state.grants
                if g.tool == tool and (not g.matching or tests_hold(g.matching, arguments()))
            ),
            None,
        )

    def approvers(self, tool: ResolvedTool) -> list[str] | None:
        if tool.policy.approvers is not None:
            return tool.policy.approvers
        return self.settings.approvers

    # --- a person's decision ---------------------------------------------------------------

    def accepts_unsigned(self, approvers: list[str] | None, signed_only: bool = False) -> bool:
        if signed_only:  # the worker's owner named the approvers: only a signature proves one
            return False
        if self.settings.accept_unsigned is not None:
            return self.settings.accept_unsigned
        return approvers is None

    def identity_problem(
        self,
        who: str | None,
        approvers: list[str] | None,
        verified: bool,
        what: str,
        signed_only: bool = False,
    ) -> str | None:
        """Why ``who`` may not decide (fail closed), or ``None``. ``signed_only``: the
        call's tool has approvers its owner named, whose decisions count signed only."""
        if not verified and signed_only:
            return f"{what}: a signed token is required (the tool's owner names its approvers)"
        if not verified and not self.accepts_unsigned(approvers):
            return f"{what}: a signed token is required (approvals.accept_unsigned is off)"
        if approvers is not None and who not in approvers:
            allowed = ", ".join(approvers) or "nobody"
            return f"{what}: {who or 'an unnamed sender'} may not decide (approvers: {allowed})"
        return None

    def request_problem(
        self, signal: ApprovalSignal, kind: DecisionKind, tool: ResolvedTool | None
    ) -> str | None:
        """What is wrong with what the decision asks (before anyone's identity counts)."""
        what = f"{kind} {signal.approval_id!r}"
        if kind == "approve" and tool is not None and tool.policy.external_output:
            return (
                f"{what}: {tool.definition.name}'s output comes from outside (its owner "
                "registered it so) and it never runs: commit its output (respond), or deny it"
            )
        if kind == "respond" and signal.content is None:
            return f"{what}: give the tool's result as content"
        if kind != "approve" and (signal.arguments is not None or signal.always is not None):
            return f"{what}: edited arguments and 'always' go with approve"
        if signal.always == "matching" and not signal.matching:
            return f"{what}: always 'matching' needs at least one test in matching"
        if signal.arguments is not None and tool is not None:
            problems = edit_problems(tool, signal.arguments)
            if problems:
                return f"{what}: the edited arguments do not fit {tool.definition.name}: {problems}"
        return None

    def record_for(
        self,
        signal: ApprovalSignal,
        kind: DecisionKind,
        pending: PendingApproval,
        now: datetime,
        verified: bool,
    ) -> ApprovalRecord:
        edited = signal.arguments is not None
        return ApprovalRecord(
            decision=RECORDED_DECISIONS[kind],
            by=signal.by,
            at=now,
            reason=signal.reason,
            original_arguments=pending.arguments if edited else None,
            arguments=json.dumps(signal.arguments) if edited else None,
            scope=signal.always,
            rule=pending.rule,
            verified=True if verified else None,
            escalated=True if pending.escalated_to else None,
        )

    def grant(
        self, signal: ApprovalSignal, pending: PendingApproval, now: datetime, verified: bool
    ) -> Grant:
        """An "always" approval becomes a standing grant."""
        self.state.grants_made += 1
        grant = Grant(
            grant_id=f"grant-{self.state.grants_made}",
            tool=pending.tool_name,
            matching=signal.matching if signal.always == "matching" else [],
            by=signal.by,
            verified=verified,
            at=now,
            approval_id=pending.approval_id,
        )
        self.state.grants = [*self.state.grants, grant]
        return grant

    def revoke(self, grant_id: str) -> bool:
        kept = [g for g in self.state.grants if g.grant_id != grant_id]
        found = len(kept) < len(self.state.grants)
        self.state.grants = kept
        return found

    @property
    def grants(self) -> list[Grant]:
        """Standing grants, in the order they were made."""
        return self.state.grants

    def grant_named(self, grant_id: str) -> Grant | None:
        return next((g for g in self.state.grants if g.grant_id == grant_id), None)


def edit_problems(tool: ResolvedTool, arguments: dict[str, Any]) -> str | None:
    """Where edited arguments break the tool's schema (``None``: they fit)."""
    schema = wire_parameters(tool.definition) or {"type": "object"}
    errors = sorted(Draft202012Validator(schema).iter_errors(arguments), key=lambda e: e.path)
    if not errors:
        return None
    return "; ".join(
        f"{'.'.join(str(p) for p in error.path) or '(arguments)'}: {error.message}"
        for error in errors[:5]
    )


# The results the loop writes itself for calls that did not run as asked: refused,
# denied, cancelled, over the limit, failed; and a call's one-line summary.

def error_result(call: ToolCall, text: str) -> ToolMessage:
    return ToolMessage(
        tool_call_id=call.id, content=text, tool_name=call.function.name, is_error=True
    )


def cancel_text(by: str | None, reason: str | None) -> str:
    """Why a turn stopped, as results and ``status`` say it."""
    who = f" by {by}" if by else ""
    return f"turn cancelled{who}" + (f": {reason}" if reason else "")


def cancelled_result(call: ToolCall, why: str) -> ToolMessage:
    """The slot of a call the turn's cancellation stopped (or kept from starting)."""
    return error_result(call, f"Error calling '{call.function.name}': not completed, {why}")


def tool_error_result(call: ToolCall, detail: str) -> ToolMessage:
    """The result of a call that failed for good, for the model to read."""
    return error_result(call, f"Error calling '{call.function.name}': {detail}")


def over_call_limit(asked: int, limit: int) -> str:
    return (
        f"Not run: this turn asked for {asked} tool calls and at most {limit} run in one "
        "turn (stop.max_tool_calls_per_turn). Ask again for the ones still needed."
    )


def denial_result(call: ToolCall, record: ApprovalRecord) -> ToolMessage:
    who = "by policy" if record.by is None else f"by {record.by}"
    if record.timed_out:
        who = "(no decision before the approval deadline)"
    reason = f": {record.reason}" if record.reason else ""
    return ToolMessage(
        tool_call_id=call.id,
        content=f"Tool call denied {who}{reason}",
        tool_name=call.function.name,
        is_error=True,
        approval=record,
    )


def guardrail_denial(call: ToolCall, reason: str) -> ToolMessage:
    return ToolMessage(
        tool_call_id=call.id,
        content=f"Tool denied by guardrail: {reason}",
        tool_name=call.function.name,
        is_error=True,
        approval=ApprovalRecord(decision="denied", by="policy", reason=reason),
    )


def call_summary(call: ToolCall, limit: int = 120) -> str:
    arguments = call.function.arguments
    if len(arguments) > limit:
        arguments = arguments[: limit - 3] + "..."
    return f"{call.function.name} {arguments}"


def not_completed(cancel: CancelTurnSignal | None, ending: EndSessionSignal | None) -> str | None:
    """Why calls without a result did not complete: a cancellation, or the end."""
    if cancel is not None:
        return cancel_text(cancel.by, cancel.reason)
    if ending is not None:
        return cancel_text(ending.by, ending.reason or "the session ended")
    return None


def guardrail_text(kind: str, verdict: GuardrailVerdict | None, reason: str) -> str:
    """Why a guardrail stopped a message or an answer, as ``status`` shows it."""
    by = f" {verdict.by}" if verdict is not None and verdict.by else ""
    return f"{kind} guardrail{by}: {reason}"
