"""Scoring a case (pure): what its session did, read off its array, and the checks a
case asks for, each a score from 0 to 1 with its reason. The model judge's score comes
from its own session (``workflows/evals.py``); ``judge_request`` is what it is asked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from jsonschema import Draft202012Validator

from durable_agent._contracts._eval_cases import CaseFacts, EvalCase, ExpectedCall, Score
from durable_agent._wire._messages import AssistantMessage, Message

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
