"""Who decides a gated call, as data: rules in the spec (allow, deny or ask by tool name
and argument tests), argument tests over JSON paths, and who may approve. Pure: no I/O,
usable inside the workflow sandbox, so the gate decides the same way on every replay.

A path names one value in the call's arguments: ``$.amount``, ``$.to.iban``,
``$.items[0].sku`` (the ``$.`` may be left out). A test compares it with ``value``;
a path that names nothing makes every test false except ``exists`` (false too).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from durable_agent._wire.messages import visible

Op = Literal["==", "!=", "<", "<=", ">", ">=", "in", "not in", "contains", "matches", "exists"]
RuleAction = Literal["allow", "deny", "ask"]

_STEP = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[\"([^\"]+)\"\]")
_MISSING = object()


class _Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def path_steps(path: str) -> list[str | int]:
    """``$.a.b[0]`` -> ``["a", "b", 0]``; a path that cannot be read is a ``ValueError``."""
    rest = path.strip()
    rest = rest[1:] if rest.startswith("$") else rest
    steps: list[str | int] = []
    position = 0
    while position < len(rest):
        found = _STEP.match(rest, position)
        if found is None or found.end() == position:
            raise ValueError(f"cannot read the path {path!r} at {rest[position:]!r}")
        name, index, quoted = found.groups()
        steps.append(int(index) if index is not None else (name or quoted))
        position = found.end()
    if not steps:
        raise ValueError(f"the path {path!r} names no argument")
    return steps


def value_at(arguments: Any, path: str) -> Any:
    """The value ``path`` names in ``arguments`` (``_MISSING`` if none)."""
    value = arguments
    for step in path_steps(path):
        if isinstance(value, dict) and isinstance(step, str):
            value = value.get(step, _MISSING)
        elif isinstance(value, list) and isinstance(step, int):
            value = value[step] if step < len(value) else _MISSING
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


class ArgumentTest(_Policy):
    """One comparison of an argument with a value: ``{"path": "$.amount", "op": ">",
    "value": 100}``."""

    path: str
    op: Op = "=="
    value: Any = None

    @field_validator("path")
    @classmethod
    def _readable(cls, path: str) -> str:
        path_steps(path)
        return path

    @model_validator(mode="after")
    def _usable(self) -> ArgumentTest:
        if self.op == "matches":
            if not isinstance(self.value, str):
                raise ValueError("op 'matches' needs a regular expression as value")
            re.compile(self.value)
        if self.op in ("in", "not in") and not isinstance(self.value, list):
            raise ValueError(f"op {self.op!r} needs a list as value")
        return self

    def holds(self, arguments: Any) -> bool:
        return self.outcome(arguments) is True

    def outcome(self, arguments: Any) -> bool | None:
        """Whether the test holds; ``None`` when the argument's type cannot be compared
        with the value (a string against a number), which the gate resolves to the
        safe side."""
        found = value_at(arguments, self.path)
        if self.op == "exists":
            return found is not _MISSING
        if found is _MISSING:
            return False
        if self.op in ("<", "<=", ">", ">=") and not _orderable(found, self.value):
            return None
        if self.op == "contains" and not isinstance(found, str | list):
            return None
        if self.op == "matches" and not isinstance(found, str):
            return None
        return _compare(found, self.op, self.value)

    def __str__(self) -> str:
        if self.op == "exists":
            return f"{self.path} exists"
        return f"{self.path} {self.op} {json.dumps(self.value)}"


def _compare(found: Any, op: Op, value: Any) -> bool:
    try:
        if op == "==":
            return bool(found == value)
        if op == "!=":
            return bool(found != value)
        if op in ("<", "<=", ">", ">="):
            if not _orderable(found, value):
                return False
            ordered = {
                "<": found < value,
                "<=": found <= value,
                ">": found > value,
                ">=": found >= value,
            }
            return bool(ordered[op])
        if op == "in":
            return found in value
        if op == "not in":
            return found not in value
        if op == "contains":
            return value in found if isinstance(found, str | list) else False
        if op == "matches":
            return isinstance(found, str) and re.search(value, found) is not None
    except TypeError:  # incomparable values: the test does not hold
        return False
    return False


def _orderable(found: Any, value: Any) -> bool:
    """Numbers with numbers (not booleans), strings with strings."""

    def number(x: Any) -> bool:
        return isinstance(x, int | float) and not isinstance(x, bool)

    return (number(found) and number(value)) or (isinstance(found, str) and isinstance(value, str))


def tests_hold(tests: list[ArgumentTest], arguments: Any) -> bool:
    return all(test.holds(arguments) for test in tests)


def tests_verdict(tests: list[ArgumentTest], arguments: Any) -> bool | None:
    """``False`` when a test fails, else ``None`` when one cannot be judged (a type
    mismatch), else ``True``."""
    outcomes = [test.outcome(arguments) for test in tests]
    if False in outcomes:
        return False
    return None if None in outcomes else True


def parse_test(text: str) -> ArgumentTest:
    """``"$.amount <= 100"`` (the CLI's form) -> an ``ArgumentTest``; the value is JSON
    when it reads as JSON, else a string."""
    ops = sorted((o for o in Op.__args__ if o != "exists"), key=len, reverse=True)  # type: ignore[attr-defined]
    stripped = text.strip()
    if stripped.endswith(" exists"):
        return ArgumentTest(path=stripped.removesuffix(" exists").strip(), op="exists")
    for op in ops:
        token = f" {op} " if op.isalpha() or " " in op else op
        if token in stripped:
            path, raw = stripped.split(token, 1)
            try:
                value = json.loads(raw.strip())
            except ValueError:
                value = raw.strip()
            return ArgumentTest(path=path.strip(), op=op, value=value)
    raise ValueError(f"cannot read the test {text!r}: write PATH OP VALUE, e.g. '$.amount <= 100'")


class ApprovalRule(_Policy):
    """One rule of the gate. The first rule that matches a call decides it: ``allow``
    runs it, ``deny`` refuses it (the model reads ``reason``), ``ask`` waits for a
    person. A call no rule matches follows its tool's own policy."""

    name: str | None = None
    """Recorded on the call's approval record (default ``rule <k>``, counted from 1)."""
    tools: list[str] = Field(default_factory=lambda: ["*"])
    """Tool names the rule is for (``*``: every tool)."""
    when: list[ArgumentTest] = Field(default_factory=list)
    """Every test must hold (none: the rule matches every call of its tools)."""
    predicate: str | None = None
    """A named predicate function (``@approval_predicate``) loaded by the workers, asked
    once per batch; it must say yes as well."""
    action: RuleAction
    reason: str | None = None
    """What a ``deny`` tells the model."""

    @field_validator("tools", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def for_tool(self, tool: str) -> bool:
        return "*" in self.tools or tool in self.tools


class Escalation(_Policy):
    """At a pending call's deadline: extend it once and let a second group decide too
    (recorded on the call), instead of applying the default decision at once."""

    extend_seconds: float = Field(gt=0)
    notify: list[str] = Field(min_length=1)
    """The second group: these names may decide the call from then on."""
    notifier: str | None = None
    """A function registered with ``@escalation_notifier`` that the workers call to tell
    that group (unset: the escalation is recorded and logged only)."""


class ApprovalSettings(_Policy):
    """``spec.approvals``: the gate's rules and who may decide."""

    rules: list[ApprovalRule] = Field(default_factory=list)
    approvers: list[str] | None = None
    """Names that may decide this session's calls (unset: anyone; a tool's own
    ``approvers`` in ``tools`` replaces this list for its calls)."""
    accept_unsigned: bool | None = None
    """Whether a decision's ``by`` counts without a signed token. Unset: only when no
    allow-list applies (a name the caller types proves nothing)."""
    escalation: Escalation | None = None

    def rule_name(self, index: int) -> str:
        return self.rules[index].name or f"rule {index + 1}"

    def predicates(self) -> list[str]:
        return sorted({r.predicate for r in self.rules if r.predicate})

    def within(self, parent: ApprovalSettings) -> ApprovalSettings:
        """These settings for a sub-agent, never laxer than its parent's: the parent's
        rules first (the first match wins), approvers only those both lists name,
        unsigned decisions only where both accept them, the parent's escalation unless
        the child has its own."""
        approvers = self.approvers
        if parent.approvers is not None:
            mine = self.approvers if self.approvers is not None else parent.approvers
            approvers = [name for name in mine if name in parent.approvers]
        unsigned = [v for v in (self.accept_unsigned, parent.accept_unsigned) if v is not None]
        return self.model_copy(
            update={
                "rules": [*parent.rules, *self.rules],
                "approvers": approvers,
                "accept_unsigned": min(unsigned) if unsigned else None,
                "escalation": self.escalation or parent.escalation,
            }
        )


def describe_arguments(tool: str, arguments: str) -> str:
    """The default readable form of a call: ``refund(invoice=7, reason="twice")``. Every
    argument is named and shown whole, whatever its length or place: a value cut short
    would let padding push what matters out of the approver's sight. Control and
    bidirectional characters are shown as escapes."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        parts = [f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in parsed.items()]
        text = f"{tool}({', '.join(parts)})"
    else:
        text = f"{tool}({arguments})"
    return visible(text)
