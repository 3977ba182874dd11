"""Every Python snippet in the README and the manual imports only public names, and says
on the line before it what it is: ``<!-- runnable -->`` (run here as written, in a fresh
interpreter), ``<!-- run by tests/....py -->`` (a test that runs it from the page, as
the README's example and the extending page's are), or ``<!-- fragment -->`` (a piece
of a program, not a whole one)."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.project.test_layering import PUBLIC_MODULES

ROOT = Path(__file__).parents[2]
BLOCK = re.compile(
    r"(?P<before>[^\n]*)\n(?P<indent>[ ]*)```python\n(?P<code>.*?)\n(?P=indent)```", re.S
)
MARK = re.compile(r"<!-- (runnable|fragment|run by (tests/[\w/]+\.py)) -->")


@dataclass(frozen=True)
class Snippet:
    where: str
    code: str
    mark: str
    """What the line before the block says it is (empty: nothing)."""

    @property
    def runnable(self) -> bool:
        return self.mark == "<!-- runnable -->"


def snippets() -> list[Snippet]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = "\n" + page.read_text()
        for match in BLOCK.finditer(text):
            line = text[: match.start("code")].count("\n")
            code = textwrap.dedent(match["code"])
            found.append(Snippet(f"{page.relative_to(ROOT)}:{line}", code, match["before"].strip()))
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


@pytest.mark.parametrize("snippet", snippets(), ids=lambda s: s.where)
def test_a_snippet_says_whether_it_runs(snippet: Snippet) -> None:
    """Marked, and a test named as running it exists and reads the page it is on."""
    mark = MARK.fullmatch(snippet.mark)
    assert mark is not None, f"{snippet.where}: mark it runnable, fragment or 'run by ...'"
    if mark[2] is not None:
        runner = ROOT / mark[2]
        page = Path(snippet.where.split(":")[0])
        text = runner.read_text()
        assert page.name in text or page.stem.upper().replace("-", "_") in text or (
            "page_block" in text and page.name == "extending.md"
        ), f"{mark[2]} does not read {page}"


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
