"""Evaluations as data (pure): the cases a dataset holds, what an evaluation run is
asked to do, and what it reports. The run itself is ``workflows/evals.py``; the
scorers are ``durable_agent._contracts._eval_scoring``."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from durable_agent._spec._spec import AgentSpec
from durable_agent._wire._contract import Contract

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
