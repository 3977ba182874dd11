"""The layers as Python loads them, each in a fresh interpreter: workflow code never
brings in an HTTP client, and the Session's pure core never brings in temporalio."""

from __future__ import annotations

import json
import subprocess
import sys


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
    loaded = loaded_by("durable_agent.workflows.session.core")
    assert "durable_agent.workflows.session.batch" in loaded, "the import did happen"
    assert not [m for m in loaded if m.split(".")[0] in ("temporalio", "httpx")], loaded


def test_the_package_imports_nothing_and_its_stub_names_every_export() -> None:
    """``durable_agent/__init__.py`` maps names to modules and imports none of them; the
    stub type checkers read gives each of those names from the same module."""
    import ast
    from pathlib import Path

    import durable_agent

    package = Path(durable_agent.__file__)
    imports = [
        node
        for node in ast.walk(ast.parse(package.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
    ]
    assert all(getattr(n, "module", None) in ("__future__", "importlib", "typing") for n in imports)
    stub = ast.parse(package.with_suffix(".pyi").read_text())
    typed = {a.name: n.module for n in stub.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert typed == durable_agent._EXPORTS
    assert set(durable_agent.__all__) == {*typed, "__version__"}
