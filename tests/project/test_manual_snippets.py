"""Every Python snippet in the README and the manual imports only public names, and says
on the line before it what it is: ``<!-- runnable -->`` (run here as written, in a fresh
interpreter), ``<!-- run by tests/....py -->`` (a test that runs it from the page, as
the README's example and the extending page's are), or ``<!-- fragment -->`` (a piece
of a program, not a whole one). A fragment is pasted into a program of the reader's:
it imports what it uses from durable-agent, and every other name it uses without
making it is made by a block above it on the page, or named (in backticks) by the
page's text between the block before it and it, which says what to add."""

from __future__ import annotations

import ast
import builtins
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
    said: str = ""
    """The page's text between the block before this one and this one."""
    above: frozenset[str] = frozenset()
    """The names the page's Python blocks above this one make or import."""

    @property
    def runnable(self) -> bool:
        return self.mark == "<!-- runnable -->"


def snippets() -> list[Snippet]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = "\n" + page.read_text()
        above: set[str] = set()
        last_end = 0
        for match in BLOCK.finditer(text):
            line = text[: match.start("code")].count("\n")
            code = textwrap.dedent(match["code"])
            said = ANY_BLOCK.sub("", text[last_end : match.start()])
            where = f"{page.relative_to(ROOT)}:{line}"
            found.append(Snippet(where, code, match["before"].strip(), said, frozenset(above)))
            above |= names_made(code)
            last_end = match.end()
    return found


ANY_BLOCK = re.compile(r"```.*?```", re.S)
"""Blocks of other languages between two Python blocks are not the page's words."""


def _tree(code: str) -> ast.AST:
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree: ast.AST = compile(code, "<snippet>", "exec", flags)
    return tree


def names_made(code: str) -> set[str]:
    """The names a block binds anywhere: imports, assignments, definitions, arguments."""
    made = set()
    for node in ast.walk(_tree(code)):
        if isinstance(node, ast.alias):
            made.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            made.add(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            made.add(node.id)
        elif isinstance(node, ast.arg):
            made.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            made.add(node.name)
    return made


def names_used(code: str) -> set[str]:
    return {
        n.id
        for n in ast.walk(_tree(code))
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }


def unsaid_names(snippet: Snippet, public: dict[str, set[str]]) -> list[str]:
    """The names a fragment uses that nothing makes: not the block, not a block above
    it, not Python; a public durable-agent name must be imported, and any other must be
    named by the text before the block."""
    every_public = set().union(*public.values())
    missing = names_used(snippet.code) - names_made(snippet.code) - snippet.above
    missing -= set(dir(builtins))
    return sorted(
        name for name in missing if name in every_public or f"`{name}" not in snippet.said
    )


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
        assert (
            page.name in text
            or page.stem.upper().replace("-", "_") in text
            or ("page_block" in text and page.name == "extending.md")
        ), f"{mark[2]} does not read {page}"


@pytest.mark.parametrize(
    "snippet", [s for s in snippets() if s.mark == "<!-- fragment -->"], ids=lambda s: s.where
)
def test_a_fragment_says_what_to_add(snippet: Snippet) -> None:
    unsaid = unsaid_names(snippet, public_names())
    assert unsaid == [], (
        f"{snippet.where} uses {', '.join(unsaid)} without making them: import the public "
        "ones, and name the rest in the text before the block (what the reader adds), or "
        "make the block whole and mark it runnable"
    )


def test_an_unsaid_name_is_caught() -> None:
    """The check itself: a public name used unimported, and a name nothing makes or says."""
    public = public_names()
    bare = Snippet("page.md:1", "agents = AgentClient(temporal)", "<!-- fragment -->")
    assert unsaid_names(bare, public) == ["AgentClient", "temporal"]
    said = Snippet(
        "page.md:1",
        "from durable_agent import AgentClient\n\nagents = AgentClient(temporal)",
        "<!-- fragment -->",
        said="With `temporal`, a temporalio client connected with the plugin:",
    )
    assert unsaid_names(said, public) == []
    continued = Snippet(
        "page.md:9", "print(agents)", "<!-- fragment -->", above=frozenset({"agents"})
    )
    assert unsaid_names(continued, public) == []


def test_a_private_import_is_caught() -> None:
    """The check itself: a private module, and a name a public module does not list."""
    public = public_names()
    assert private_imports("from durable_agent._wire.messages import Message", public)
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
