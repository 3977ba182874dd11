"""The README's example, run as written: a ``durable-agent worker`` loads it as its
agents module (with a scripted model, and with the test model, where the README says
``--model test``), and the example's ``main()`` runs in a fresh interpreter against the
test's dev server. Only where the model lives changes; the example's text does not."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.project.test_cli import address_of

ROOT = Path(__file__).parent.parent.parent


def readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme[readme.index("## An example") :].split("```python\n", 1)[1].split("```", 1)[0]


async def run_example(
    env: WorkflowEnvironment, tmp_path: Path, task_queue: str, *worker_args: str
) -> tuple[list[str], str]:
    """Start the worker on the example's module, run ``python weather.py``; what the
    example printed, and what the worker printed."""
    (tmp_path / "weather.py").write_text(readme_example())
    environment = {
        **os.environ,
        "TEMPORAL_ADDRESS": address_of(env),
        "DURABLE_AGENT_TASK_QUEUE": task_queue,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "PYTHONFAULTHANDLER": "1",  # a crash shows its stacks
    }
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "durable_agent._cli.main",
        "worker",
        "--agents",
        "weather",
        *worker_args,
        cwd=tmp_path,
        env=environment,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert worker.stdout is not None
    said = []
    while not said or not said[-1].startswith("worker ready"):
        line = (await asyncio.wait_for(worker.stdout.readline(), 60)).decode()
        assert line, "the worker stopped: " + "".join(said)
        said.append(line.strip())
    try:
        example = await asyncio.create_subprocess_exec(
            sys.executable,
            "weather.py",
            cwd=tmp_path,
            env=environment,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(example.communicate(), 120)
    finally:
        worker.terminate()
        await worker.wait()
    assert example.returncode == 0, f"{out.decode()[-1500:]}\n{err.decode()[-6000:]}"
    return out.decode().strip().splitlines(), "\n".join(said)


async def test_the_readme_example_asks_for_an_approval_and_answers_typed(
    temporal_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    script = [
        assistant_calls(("get_weather", {"city": "Oslo"})),
        assistant_calls(("send_report", {"to": "ana@example.com", "text": "4C, rain"})),
        assistant_text('{"city": "Oslo", "weather": "4C, rain", "mailed_to": "ana@example.com"}'),
    ]
    with ScriptedProvider(script) as provider:
        # the worker's own `openai` endpoint is where the scripted model listens
        capabilities = tmp_path / "capabilities.json"
        endpoint = {"base_url": provider.base_url, "api_key_env": None}
        capabilities.write_text(json.dumps({"models": {"openai": endpoint}}))
        printed, _ = await run_example(
            temporal_env, tmp_path, task_queue, "--capabilities", str(capabilities)
        )
    # the typed answer, printed as the Report it is
    assert printed[-1] == "city='Oslo' weather='4C, rain' mailed_to='ana@example.com'", printed
    sent = [m for m in provider.requests[2].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in sent] == ["4C, rain", "sent to ana@example.com"]


async def test_a_worker_with_the_test_model_runs_the_readme_example_unchanged(
    temporal_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    """``durable-agent worker --model test``: no key, no provider. The test model calls
    both tools (the report waits for the example's approval), then answers a Report."""
    printed, worker = await run_example(temporal_env, tmp_path, task_queue, "--model", "test")
    assert "answered by the test model" in worker
    assert printed[-1] == "city='a' weather='a' mailed_to='a'", printed
