"""The seeds page is exact: each row cites the tests that show it by name (not only a
file), every test and file it names exists, and what it says of the conformance
vectors' fields is what the suite does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.conformance.turn_waivers import UNCHECKED_FIELD_REASONS

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "project" / "seeds.md"
#: A test named on the page: ``tests/.../test_x.py``, ``...::test_y`` or, for one case of
#: a parametrized test, ``...::test_y[case]``.
TEST = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+(?:\[[\w-]+\])?))?`")
#: A project file named on the page, by its path.
SOURCE = re.compile(r"`((?:durable_agent|workflows|activities)/[\w/]+\.py)`")


def rows() -> list[tuple[int, list[str]]]:
    """Each table row past the headers: its line and its cells."""
    found = []
    for number, line in enumerate(PAGE.read_text().splitlines(), 1):
        if not line.startswith("|") or line.startswith("| ---") or "| what it asks |" in line:
            continue
        found.append((number, [cell.strip() for cell in line.strip("|").split(" | ")]))
    return found


def collected(paths: set[str]) -> set[str]:
    """The test ids pytest collects from ``paths`` (``file::name`` and ``file::name[case]``),
    as it would run them."""
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:randomly",
            *sorted(paths),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    ids = {line.strip() for line in run.stdout.splitlines() if "::" in line}
    assert ids, run.stdout + run.stderr
    return (
        ids
        | {i.split("[")[0] for i in ids}
        | {i.split("::")[0] + "::" + i.split("::")[-1].split("[")[0] for i in ids}
    )


def test_every_row_cites_the_tests_that_show_it_by_name() -> None:
    table = rows()
    assert len(table) > 40, "the page's tables were not found"
    unnamed = [
        f"line {number}: {cells[0]}"
        for number, cells in table
        if not any(name for _, name in TEST.findall(cells[-1]))
    ]
    assert unnamed == [], "rows that cite no test by name"


def test_every_test_and_file_the_page_names_exists() -> None:
    text = PAGE.read_text()
    cited = TEST.findall(text)
    missing = sorted({path for path, _ in cited if not (ROOT / path).is_file()})
    missing += [path for path in SOURCE.findall(text) if not (ROOT / path).is_file()]
    assert missing == []
    ids = collected({path for path, name in cited if name})
    assert sorted({f"{p}::{n}" for p, n in cited if n} - ids) == []


def test_the_page_names_each_vector_field_the_suite_does_not_compare() -> None:
    """It may not say "every field"; it names the ones left out, as the suite does."""
    text = PAGE.read_text()
    assert "every expected field compared" not in text
    for field in UNCHECKED_FIELD_REASONS:
        assert f"`{field}`" in text, field
