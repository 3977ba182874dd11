"""The layers as Python loads them, each in a fresh interpreter: workflow code never
brings in an HTTP client, the Session's pure core never brings in temporalio, and the
package's face loads nothing until a name is used. (Which package may import which is
import-linter's to check: its contracts are in pyproject.toml.)"""

from __future__ import annotations

import compileall
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


def loaded_by(module: str) -> list[str]:
    """Every module a fresh interpreter has loaded once ``module`` is imported."""
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names: list[str] = json.loads(run.stdout)
    return names


def test_workflow_code_never_loads_an_http_client() -> None:
    loaded = loaded_by("durable_agent.workflows.agent_workflow")
    assert "temporalio.workflow" in loaded, "the import did happen"
    assert not [m for m in loaded if m.split(".")[0] in ("httpx", "httpcore", "mcp")], loaded


def test_the_session_core_loads_no_temporalio() -> None:
    loaded = loaded_by("durable_agent.session._session")
    assert "durable_agent.session._batch" in loaded, "the import did happen"
    assert not [m for m in loaded if m.split(".")[0] in ("temporalio", "httpx")], loaded


def test_the_package_face_imports_nothing_and_names_at_most_forty() -> None:
    """``import durable_agent`` loads no module of the package but its version; its
    public names load on first use, and the table they load from names exactly the
    imports type checkers read."""
    loaded = loaded_by("durable_agent")
    assert [m for m in loaded if m.startswith("durable_agent.")] == ["durable_agent._version"]
    import durable_agent

    assert 0 < len(durable_agent.__all__) <= 40
    for name in durable_agent.__all__:
        assert getattr(durable_agent, name) is not None, name
    source = Path(durable_agent.__file__).read_text()
    imported = dict(
        (name, module)
        for module, name in re.findall(
            r"\n    from (durable_agent\.\w+) import (\w+) as \w+", source
        )
    )
    assert imported == durable_agent._PUBLIC
    assert durable_agent.__version__


def test_an_install_with_only_bytecode_finds_every_public_name(tmp_path: Path) -> None:
    """The package as an installer lays it out (the workflow and activity folders
    under it), compiled, with every source file removed: each public name loads."""
    root = Path(__file__).parents[2]
    package = tmp_path / "durable_agent"
    shutil.copytree(root / "durable_agent", package, ignore=shutil.ignore_patterns("__pycache__"))
    for folder in ("workflows", "activities"):
        shutil.copytree(
            root / folder, package / folder, ignore=shutil.ignore_patterns("__pycache__")
        )
    assert compileall.compile_dir(package, legacy=True, quiet=1)
    for source in package.rglob("*.py"):
        source.unlink()
    code = (
        "import durable_agent, json; "
        "print(json.dumps([durable_agent.__file__, durable_agent.__version__, "
        "[getattr(durable_agent, n).__name__ for n in durable_agent.__all__]]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert run.returncode == 0, run.stderr[-2000:]
    where, version, names = json.loads(run.stdout)
    assert where.startswith(str(tmp_path)) and where.endswith(".pyc")
    assert version and len(names) == len(durable_agent_names())


def durable_agent_names() -> list[str]:
    import durable_agent

    return list(durable_agent.__all__)
