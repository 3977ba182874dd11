"""Every Python snippet in the README and the manual imports only public names, and the
ones marked runnable (an HTML comment ``<!-- runnable -->`` on the line before the
block) run as written, in a fresh interpreter."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.project.test_layering import PUBLIC_MODULES

ROOT = Path(__file__).parents[2]
BLOCK = re.compile(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)\n```", re.S)


@dataclass(frozen=True)
class Snippet:
    where: str
    code: str
    runnable: bool


def snippets() -> list[Snippet]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = "\n" + page.read_text()
        for match in BLOCK.finditer(text):
            line = text[: match.start("code")].count("\n")
            found.append(
                Snippet(
                    f"{page.relative_to(ROOT)}:{line}",
                    match["code"],
                    match["before"].strip() == "<!-- runnable -->",
                )
            )
    return found


def public_names() -> dict[str, set[str]]:
    return {m: set(importlib.import_module(m).__all__) for m in PUBLIC_MODULES}


def private_imports(code: str, public: dict[str, set[str]]) -> list[str]:
    tree = compile(code, "<snippet>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    wrong = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("durable_agent"):
            module = node.module or ""
            names = public.get(module, set()) | {"__version__"}
            wrong += [f"{module}.{a.name}" for a in node.names if a.name not in names]
        elif isinstance(node, ast.Import):
            wrong += [
                a.name
                for a in node.names
                if a.name.startswith("durable_agent") and a.name not in public
            ]
    return wrong


def test_the_manual_has_snippets_and_some_run() -> None:
    found = snippets()
    assert len(found) >= 20, [s.where for s in found]
    assert any(s.runnable for s in found)


@pytest.mark.parametrize("snippet", snippets(), ids=lambda s: s.where)
def test_a_snippet_imports_only_public_names(snippet: Snippet) -> None:
    assert private_imports(snippet.code, public_names()) == []


def test_a_private_import_is_caught() -> None:
    """The check itself: a private module, and a name a public module does not list."""
    public = public_names()
    assert private_imports("from durable_agent._wire._messages import Message", public)
    assert private_imports("from durable_agent.temporal import free_port", public)
    assert not private_imports("from durable_agent.temporal import build_worker", public)


@pytest.mark.parametrize("snippet", [s for s in snippets() if s.runnable], ids=lambda s: s.where)
def test_a_runnable_snippet_runs_as_written(snippet: Snippet, tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", snippet.code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
