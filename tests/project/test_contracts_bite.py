"""The architecture's contracts (pyproject's ``[tool.importlinter]``) hold for the package
as it installs, and each one fails when an import it forbids is added: a contract that
cannot break guards nothing."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

#: For each contract: a module of the installed package and an import that breaks it.
BREAKS = {
    "Each layer imports only the layers below it": (
        "durable_agent/_wire/messages.py",
        "import durable_agent._session.state_machine",
    ),
    (
        "Messages, the spec, the contracts and the session are pure: no temporalio, no HTTP"
        " client"
    ): (
        "durable_agent/_session/gate.py",
        "import temporalio.workflow",
    ),
    "Workflow code makes no HTTP request": (
        "durable_agent/_workflows/retries.py",
        "import httpx",
    ),
    (
        "The workflows and the activities stay apart (determinism on one side, effects on"
        " the other)"
    ): (
        "durable_agent/_workflows/retries.py",
        "import durable_agent._activities.running",
    ),
    (
        "A client loads no worker: not the workflows, the activities, the session or the"
        " worker's own parts"
    ): (
        "durable_agent/_client/results.py",
        "import durable_agent._session.state_machine",
    ),
}


def lint(tree: Path) -> str:
    """lint-imports over the package laid out as it installs under ``tree``."""
    done = subprocess.run(
        [Path(sys.executable).with_name("lint-imports"), ROOT / "pyproject.toml", "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    return done.stdout + done.stderr


@pytest.mark.xdist_group("contracts")
def test_every_contract_holds_and_fails_when_broken(tmp_path: Path) -> None:
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names = [contract["name"] for contract in settings["tool"]["importlinter"]["contracts"]]
    assert sorted(names) == sorted(BREAKS), "each contract has its breaking import"
    package = tmp_path / "durable_agent"
    caches = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "durable_agent", package, ignore=caches)
    for folder in ("workflows", "activities"):
        shutil.copytree(ROOT / folder, package / f"_{folder}", ignore=caches)
    clean = lint(tmp_path)
    assert f"Contracts: {len(BREAKS)} kept, 0 broken." in clean, clean
    for name, (module, line) in BREAKS.items():
        path = tmp_path / module
        before = path.read_text()
        path.write_text(before + f"\n{line}  # noqa\n")
        try:
            out = lint(tmp_path)
        finally:
            path.write_text(before)
        # (a broken lower layer may break a contract above it too: the client's, say)
        assert f"{name} BROKEN" in " ".join(out.split()), (name, out)
