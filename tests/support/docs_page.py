"""The manual's code blocks, run as they stand on the page."""

from __future__ import annotations

import functools
import sys
import types
from pathlib import Path
from typing import Any

EXTENDING = Path(__file__).parent.parent.parent / "docs" / "how-to" / "extending.md"


def page_block(after: str, kind: str = "python", page: Path = EXTENDING) -> str:
    """The first ``kind`` code block after the heading ``after``."""
    text = page.read_text()
    return text[text.index(after) :].split(f"```{kind}\n", 1)[1].split("```", 1)[0]


@functools.cache  # once per process, as a program registers what it adds once
def run_page_block(after: str, page: Path = EXTENDING) -> dict[str, Any]:
    """The block's names, run as a module of its own (as a reader's file would be:
    pydantic resolves its models' annotations there)."""
    name = "docs_page_" + "".join(c if c.isalnum() else "_" for c in after.lower())
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(page_block(after, page=page), str(page), "exec"), module.__dict__)
    return module.__dict__
