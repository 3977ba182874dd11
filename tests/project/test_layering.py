"""The layers as Python loads them, each in a fresh interpreter: workflow code never
brings in an HTTP client, the Session's pure core never brings in temporalio, and the
package's face loads nothing until a name is used. (Which package may import which is
import-linter's to check: its contracts are in pyproject.toml.)"""

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
    loaded = loaded_by("durable_agent.session._session")
    assert "durable_agent.session._batch" in loaded, "the import did happen"
    assert not [m for m in loaded if m.split(".")[0] in ("temporalio", "httpx")], loaded


def test_the_package_face_imports_nothing_and_names_at_most_forty() -> None:
    """``import durable_agent`` loads no module of the package; its public names, each
    written once (as the imports type checkers read), load on first use."""
    loaded = loaded_by("durable_agent")
    assert [m for m in loaded if m.startswith("durable_agent.")] == []
    import durable_agent

    assert 0 < len(durable_agent.__all__) <= 40
    for name in durable_agent.__all__:
        assert getattr(durable_agent, name) is not None, name
