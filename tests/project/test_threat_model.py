"""The threat model names a test for every capability, and every test it names exists:
a row that cites a renamed or deleted test, or a capability without a row, fails here."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "concepts" / "security.md"
CITED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")
#: Every capability the project has: each needs its row (a new one lands with it).
CAPABILITIES = [
    "Specs and admission",
    "URLs a development policy allows",
    "Carried state",
    "Owner floors",
    "Approvers on a tool",
    "Signed decisions",
    "Inline runs",
    "Sub-agents",
    "Describers",
    "Outputs from outside",
    "Files by URL",
    "Prompt caching",
    "Message ids",
    "Logs",
    "Secrets",
    "Registered services",
    "Task queues",
    "The gateway's entry points",
    "The codec endpoint",
    "Encryption at rest",
    "Replays",
]


def _tests_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def _rows() -> dict[str, str]:
    section = PAGE.read_text().split("## Every capability, its threat and its test", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        if line.startswith("| **"):
            name = line.split("**", 2)[1]
            rows[name] = line
    return rows


def test_every_test_the_security_page_names_exists() -> None:
    missing = []
    for file, name in CITED.findall(PAGE.read_text()):
        path = ROOT / file
        if not path.is_file():
            missing.append(file)
        elif name and name not in _tests_in(path):
            missing.append(f"{file}::{name}")
    assert missing == [], f"the security page names tests that do not exist: {missing}"


def test_every_capability_has_a_row_with_a_named_test() -> None:
    rows = _rows()
    assert sorted(rows) == sorted(CAPABILITIES), "a capability without a row, or a row unlisted"
    for name, line in rows.items():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == 4, f"{name}: capability, threat, what holds, shown by"
        assert any(n for _, n in CITED.findall(cells[3])), f"{name}: names no test function"
