"""Reading a structured final answer: JSON parsed, raw text always kept."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StructuredOutput:
    raw: str
    value: Any = None
    error: str | None = None
    """Why the text could not be used as the structured answer (``value`` is then ``None``)."""

    @property
    def ok(self) -> bool:
        return self.error is None


def parse_structured_output(text: str) -> StructuredOutput:
    """Parse the model's answer as JSON; on failure report why and keep the raw text."""
    try:
        return StructuredOutput(raw=text, value=json.loads(text))
    except ValueError as error:
        return StructuredOutput(raw=text, error=f"the answer is not valid JSON: {error}")
