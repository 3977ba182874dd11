"""Evaluations as data (pure): the cases a dataset holds, what an evaluation run is
asked to do, and what it reports; and scoring a case (below): the facts read off its
session's array, and each check the case asks for as a score from 0 to 1 with its reason.
The run itself is ``workflows/evals.py``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field

from durable_agent._spec.document import AgentSpec
from durable_agent._wire.messages import AssistantMessage, Contract, Message

#: The evaluation workflow's type.
EVAL_WORKFLOW = "durable-agent-eval"


class ExpectedCall(BaseModel):
    """A tool call a case expects: its name, and the arguments given (others may be
    there too)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None


class EvalCase(BaseModel):
    """One line of a dataset (JSONL): the message, and what a good answer is.

    ``expected``: the answer's text, exactly (surrounding spaces aside);
    ``expected_output``: the typed output, equal as JSON; ``schema``: the typed output
    must validate against it (the spec's ``output_schema`` is checked by the session
    itself); ``tools``: the calls, in order; ``criteria``: a model judge's rubric (the
    run's ``judge`` answers it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    input: str = Field(min_length=1)
    expected: str | None = None
    expected_output: Any = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    tools: list[ExpectedCall] | None = None
    criteria: str | None = None


def read_cases(text: str) -> list[EvalCase]:
    """The cases of a JSONL dataset; ``ValueError`` naming the line at fault."""
    cases: list[EvalCase] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            cases.append(EvalCase.model_validate(json.loads(line)))
        except ValueError as error:
            raise ValueError(f"line {number}: {error}") from None
    ids = [case.id for case in cases]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate is not None:
        raise ValueError(f"case id {duplicate!r} appears twice")
    if not cases:
        raise ValueError("the dataset has no cases")
    return cases


#: What an evaluation does with a case's call that waits for a person.
EvalApprovals = Literal["fail", "deny", "approve", "person"]


class EvalInput(Contract):
    """An evaluation run: each case a one-shot session of ``spec``, at most
    ``concurrency`` at once, until the budget is spent (cases left then are
    ``skipped``)."""

    spec: AgentSpec
    cases: list[EvalCase] = Field(min_length=1)
    agent: str = ""
    """What the report calls the agent (a name, or the spec file's)."""
    concurrency: int = Field(default=4, ge=1, le=100)
    max_total_tokens: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    judge: AgentSpec | None = None
    """The model judge, for cases with ``criteria``: a one-shot session whose answer
    (typed: ``{"score": 0..1, "reason": ...}``) scores the case."""
    approvals: EvalApprovals = "fail"
    """What a case's call that waits for a person gets: ``fail`` ends the case failed,
    naming the call; ``deny`` and ``approve`` decide it as ``approver``; ``person``
    leaves it to a person (the report lists the calls that wait)."""
    approver: str = Field(default="eval", min_length=1)
    """Who ``approve`` and ``deny`` decide as (the tool's approvers must include them;
    a tool whose owner takes only signed decisions cannot be decided so)."""


class Score(Contract):
    name: str
    score: float = Field(ge=0, le=1)
    reason: str


class CaseFacts(Contract):
    """What a case's session did, read back from it."""

    answer: str = ""
    structured_output: Any = None
    tool_calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)
    messages: int = 0


class CaseReport(Contract):
    id: str
    status: Literal["scored", "failed", "skipped"]
    session_id: str | None = None
    scores: list[Score] = Field(default_factory=list)
    answer: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)
    tokens: int = 0
    cost_usd: float | None = None
    duration_ms: int = 0
    error: str | None = None

    @property
    def mean(self) -> float | None:
        return sum(s.score for s in self.scores) / len(self.scores) if self.scores else None


class EvalReport(Contract):
    eval_id: str
    agent: str
    done: bool
    cases: list[CaseReport]
    tokens: int = 0
    cost_usd: float | None = None
    waiting: dict[str, list[str]] = Field(default_factory=dict)
    """Cases whose calls wait for a person (``approvals: person``): case id, tools."""


class CaseToScore(Contract):
    """A case whose session ended: the ``score_case`` activity's input."""

    session_id: str
    case: EvalCase


class CaseScored(Contract):
    facts: CaseFacts
    scores: list[Score]


# Scoring a case (pure): what its session did, read off its array, and the checks a
# case asks for, each a score from 0 to 1 with its reason. The model judge's score comes
# from its own session (``workflows/evals.py``); ``judge_request`` is what it is asked.

#: The typed answer the judge gives.
JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "score": {"type": "number", "minimum": 0, "maximum": 1},
        "reason": {"type": "string"},
    },
    "required": ["score", "reason"],
    "additionalProperties": False,
}


def case_facts(messages: Sequence[Message], answer: str, structured: Any) -> CaseFacts:
    calls: list[tuple[str, dict[str, Any]]] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or []:
                try:
                    arguments = json.loads(call.function.arguments or "{}")
                except ValueError:
                    arguments = {"(unparsed)": call.function.arguments}
                calls.append(
                    (
                        call.function.name,
                        arguments if isinstance(arguments, dict) else {"(value)": arguments},
                    )
                )
    return CaseFacts(
        answer=answer, structured_output=structured, tool_calls=calls, messages=len(messages)
    )


def score_case(case: EvalCase, facts: CaseFacts) -> list[Score]:
    """Every check the case asks for but the judge's."""
    scores: list[Score] = []
    if case.expected is not None:
        same = facts.answer.strip() == case.expected.strip()
        reason = (
            "the answer is the expected text"
            if same
            else (f"expected {case.expected.strip()!r}, got {facts.answer.strip()[:200]!r}")
        )
        scores.append(Score(name="exact", score=float(same), reason=reason))
    if case.expected_output is not None:
        same = _json(facts.structured_output) == _json(case.expected_output)
        reason = (
            "the typed output is the expected one"
            if same
            else (
                f"expected {_json(case.expected_output)[:200]}, got "
                f"{_json(facts.structured_output)[:200]}"
            )
        )
        scores.append(Score(name="output", score=float(same), reason=reason))
    if case.schema_ is not None:
        errors = sorted(
            Draft202012Validator(case.schema_).iter_errors(facts.structured_output),
            key=lambda e: list(e.path),
        )
        reason = (
            "the typed output matches the schema"
            if not errors
            else (f"{'/'.join(map(str, errors[0].path)) or 'output'}: {errors[0].message}")
        )
        scores.append(Score(name="schema", score=float(not errors), reason=reason))
    if case.tools is not None:
        scores.append(tool_score(case.tools, facts.tool_calls))
    return scores


def tool_score(
    expected: Sequence[ExpectedCall], made: Sequence[tuple[str, dict[str, Any]]]
) -> Score:
    """The share of positions where the call made is the one expected (its name, and
    the arguments the case gives), over the longer of the two sequences."""
    length = max(len(expected), len(made))
    if length == 0:
        return Score(name="tools", score=1.0, reason="no tool calls, as expected")
    matched, first_miss = 0, None
    for index in range(length):
        want = expected[index] if index < len(expected) else None
        got = made[index] if index < len(made) else None
        if want is not None and got is not None and _matches(want, got):
            matched += 1
        elif first_miss is None:
            first_miss = f"call {index}: expected {_call(want)}, made {_call(got)}"
    reason = "every call as expected, in order" if first_miss is None else first_miss
    return Score(name="tools", score=matched / length, reason=reason)


def judge_request(case: EvalCase, facts: CaseFacts) -> str:
    """What the judge is asked: the rubric, the case, and what the agent did."""
    calls = "; ".join(f"{name}({json.dumps(args)})" for name, args in facts.tool_calls) or "none"
    return (
        f"Rubric: {case.criteria}\n\nThe user asked: {case.input}\n\nTool calls: {calls}\n\n"
        f"The agent answered: {facts.answer}\n\nScore the answer against the rubric from 0 "
        "(fails it) to 1 (meets it), with a one-sentence reason."
    )


def judge_score(structured: Any) -> Score:
    if not isinstance(structured, dict) or "score" not in structured:
        return Score(name="judge", score=0.0, reason="the judge gave no score")
    score = min(1.0, max(0.0, float(structured["score"])))
    return Score(name="judge", score=score, reason=str(structured.get("reason", "")))


def _matches(want: ExpectedCall, got: tuple[str, dict[str, Any]]) -> bool:
    name, arguments = got
    given = want.arguments or {}
    return name == want.name and all(arguments.get(k) == v for k, v in given.items())


def _call(call: ExpectedCall | tuple[str, dict[str, Any]] | None) -> str:
    if call is None:
        return "nothing"
    if isinstance(call, ExpectedCall):
        return f"{call.name}({json.dumps(call.arguments or {})})"
    return f"{call[0]}({json.dumps(call[1])})"


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
