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
