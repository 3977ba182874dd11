"""Each extra starts what it names with only that extra installed: a fresh virtual
environment per extra, the package from its wheel, and the command run there."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent.temporal._local import free_port
from tests.project.test_cli import address_of
from tests.project.test_packaging import wheel  # noqa: F401  (the fixture)
from tests.support.postgres_server import running_postgres
from tests.temporal.test_large_payloads import serving

#: A fresh install is heavy on a 2-core machine: these tests run one after another on
#: one pytest worker (``--dist loadgroup``), not side by side beside the rest of the suite.
FRESH_INSTALLS = pytest.mark.xdist_group("fresh-installs")


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


@FRESH_INSTALLS
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


#: An extra, what starting it alone takes, and a check of what it names.
WORKER_EXTRAS = {
    # spans exported over OTLP/HTTP: the SDK is configured at start
    "otel": ["--otlp-endpoint", "http://127.0.0.1:9/v1/traces"],
    # OpenAI's tokenizer for context budgets: loaded (from its bundled file) at start
    "tokenizer": [],
    # tools from MCP servers: a registered server (listed when a session starts)
    "mcp": ["--capabilities", "{caps}"],
    # OpenAPI documents in YAML: a registered service whose document is YAML
    "openapi": ["--capabilities", "{caps}"],
    # the PostgreSQL transcript store: a real server, connected to at start
    "postgres": ["--transcript-store", "{postgres}"],
    # payloads in a bucket: S3 (moto's server) and GCS (an emulator) on 127.0.0.1
    "s3": ["--payload-store", "s3://payloads"],
    "gcs": ["--payload-store", "gs://payloads"],
}
CHECKS = {
    "otel": "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http",
    "tokenizer": (
        "from durable_agent._wire.context import text_units, tokenizer_available; "
        "assert tokenizer_available('cl100k_base'); "
        "assert text_units('hello world', 'cl100k_base') > 0"
    ),
    "mcp": "import mcp",
    "openapi": "import yaml; assert yaml.safe_load('openapi: 3.1.0')",
    "postgres": "import psycopg, psycopg_pool",
    "s3": "import aioboto3",
    "gcs": "import gcloud.aio.storage",
}


@FRESH_INSTALLS
@pytest.mark.timeout(1800)
def test_each_worker_extra_alone_starts_its_worker(
    wheel: Path,  # noqa: F811
    tmp_path: Path,
    temporal_env: WorkflowEnvironment,
) -> None:
    """For each extra, one after another (a fresh install is heavy: side by side they
    would load the machine the rest of the suite runs on): ``durable-agent worker``
    with only that extra installed starts (says it is ready, with no traceback), and
    what the extra brings works there."""
    for extra in sorted(WORKER_EXTRAS):
        _extra_alone(extra, wheel, tmp_path / extra, temporal_env)


def _extra_alone(
    extra: str, built: Path, tmp_path: Path, temporal_env: WorkflowEnvironment
) -> None:
    tmp_path.mkdir()
    python = fresh_environment(tmp_path / "venv", built, extra)
    has = subprocess.run(
        [str(python), "-c", CHECKS[extra]], capture_output=True, text=True, timeout=120
    )
    assert has.returncode == 0, f"{extra}: {has.stderr[-2000:]}"
    caps = tmp_path / "caps.json"
    document = tmp_path / "billing.yaml"
    document.write_text("openapi: 3.1.0\ninfo: {title: billing, version: '1'}\npaths: {}\n")
    registered = {
        "mcp": {"mcp_servers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}},
        "openapi": {"openapi": {"billing": {"document": str(document)}}},
    }
    caps.write_text(json.dumps(registered.get(extra, {})))
    with contextlib.ExitStack() as stack:
        postgres = stack.enter_context(running_postgres()) if extra == "postgres" else ""
        env: dict[str, str] = {}
        if extra == "s3":
            address = stack.enter_context(
                serving("moto_server", "-H", "127.0.0.1", "-p", "PORT", port="PORT")
            )
            env = {
                "AWS_ENDPOINT_URL": address,
                "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_DEFAULT_REGION": "us-east-1",
            }
        elif extra == "gcs":
            args = ["start", "--host", "127.0.0.1", "--port", "PORT", "--in-memory"]
            emulator = serving(
                "gcp-storage-emulator", *args, "--default-bucket", "payloads", port="PORT"
            )
            env = {"STORAGE_EMULATOR_HOST": stack.enter_context(emulator)}
        args = [
            a.replace("{caps}", str(caps)).replace("{postgres}", postgres)
            for a in WORKER_EXTRAS[extra]
        ]
        said, rest = _start_worker(tmp_path, temporal_env, extra, args, env)
    assert any("worker ready" in line for line in said), (
        f"{extra}: " + "".join(said)[-3000:] + rest[-2000:]
    )
    assert "Traceback" not in "".join(said) + rest, extra


def _start_worker(
    tmp_path: Path,
    temporal_env: WorkflowEnvironment,
    extra: str,
    args: list[str],
    env: dict[str, str],
) -> tuple[list[str], str]:
    """What ``durable-agent worker ARGS`` of the fresh environment says until it is
    ready (or stops), and the rest once told to stop."""
    worker = subprocess.Popen(
        [str(tmp_path / "venv" / "bin" / "durable-agent"), "worker", *args],
        env={
            "PATH": "/usr/bin:/bin",
            "TEMPORAL_ADDRESS": address_of(temporal_env),
            "DURABLE_AGENT_TASK_QUEUE": f"extra-{extra}",
            **env,
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    said: list[str] = []
    try:
        assert worker.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = worker.stdout.readline()
            if not line:
                break
            said.append(line)
            if "worker ready" in line:
                break
    finally:
        worker.terminate()
        rest, _ = worker.communicate(timeout=120)
    return said, rest


@FRESH_INSTALLS
@pytest.mark.timeout(1200)
def test_the_docs_extra_alone_builds_the_manual(
    wheel: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``mkdocs build --strict`` with ``durable-agent[docs]`` and nothing else: the
    manual builds, its API reference generated from the installed package's public
    lists."""
    python = fresh_environment(tmp_path / "venv", wheel, "docs")
    site = tmp_path / "site"
    root = Path(__file__).parents[2]
    command = ["-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml")]
    built = subprocess.run(
        [str(python), *command, "-d", str(site)],
        env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    reference = (site / "reference" / "api" / "index.html").read_text()
    assert "AgentClient" in reference and "DecisionRequest" in reference
