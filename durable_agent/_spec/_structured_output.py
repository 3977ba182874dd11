"""Reading a structured final answer: JSON parsed and checked against the spec's
schema, the raw text always kept. Pure: the workflow calls it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError


@dataclass(frozen=True)
class StructuredOutput:
    raw: str
    value: Any = None
    error: str | None = None
    """Why the text could not be used as the structured answer (``value`` is then ``None``)."""

    @property
    def ok(self) -> bool:
        return self.error is None


def check_output_schema(schema: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the problem when ``schema`` is not a usable JSON Schema."""
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        raise ValueError(f"not a valid JSON Schema: {error.message}") from None


def parse_structured_output(text: str, schema: dict[str, Any] | None = None) -> StructuredOutput:
    """Parse the model's answer as JSON and validate it against ``schema``; on failure
    report every reason (with where in the document) and keep the raw text."""
    try:
        value = json.loads(text)
    except ValueError as error:
        return StructuredOutput(raw=text, error=f"the answer is not valid JSON: {error}")
    if schema is None:
        return StructuredOutput(raw=text, value=value)
    problems = sorted(
        Draft202012Validator(schema).iter_errors(value), key=lambda e: list(e.absolute_path)
    )
    if problems:
        reasons = "; ".join(
            f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in problems
        )
        return StructuredOutput(raw=text, error=f"the answer does not match the schema: {reasons}")
    return StructuredOutput(raw=text, value=value)
