"""Every flag the README and the manual give a ``durable-agent`` command is one that
command takes: each documented command's ``--help`` is read, and each flag named after
it (in a code span or a shell block) must be listed there."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
#: ``durable-agent COMMAND ...`` up to the end of its code span or line.
USE = re.compile(r"durable-agent\s+([a-z][a-z-]*)([^`\n]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def documented() -> dict[str, dict[str, list[str]]]:
    """Each command, each flag the pages give it, and where."""
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    for page in pages:
        if page.name == "changelog.md":
            continue  # history: flags that were
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for command, rest in USE.findall(line):
                for flag in FLAG.findall(rest):
                    found[command][flag].append(f"{page.relative_to(ROOT)}:{number}")
    return found


def help_of(command: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "durable_agent._cli.main", command, "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"durable-agent {command} --help: {run.stderr[-1000:]}"
    return run.stdout


DOCUMENTED = documented()


def test_the_manual_names_commands_and_flags() -> None:
    assert len(DOCUMENTED) >= 10 and sum(len(f) for f in DOCUMENTED.values()) >= 20


@pytest.mark.parametrize("command", sorted(DOCUMENTED))
def test_each_flag_the_manual_gives_a_command_is_one_it_takes(command: str) -> None:
    listed = set(FLAG.findall(help_of(command)))
    unknown = {flag: where for flag, where in DOCUMENTED[command].items() if flag not in listed}
    assert unknown == {}, f"durable-agent {command} takes none of these: {unknown}"
