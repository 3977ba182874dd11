"""The tutorial's three files, run as written: ``my_agents.py``, ``worker.py`` (started
as its own process, with a scripted model where the page says api.openai.com) and
``ask.py`` (in a fresh interpreter, against the test's dev server). Only where the
model lives changes; the programs' text does not."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.testing import WorkflowEnvironment

from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.project.test_cli import address_of
from tests.support.agent_harness import wait_for

ROOT = Path(__file__).parent.parent.parent
TUTORIAL = ROOT / "docs" / "tutorial" / "first-agent.md"
OPENAI = 'ProviderEndpoint(base_url="https://api.openai.com/v1", api_key_env="OPENAI_API_KEY")'


def tutorial_files() -> dict[str, str]:
    """The page's Python blocks by the file name the text before each one gives."""
    text = TUTORIAL.read_text()
    found = {}
    for match in re.finditer(r"Save this as\s+`(\w+\.py)`.*?```python\n(.*?)```", text, re.S):
        found[match[1]] = match[2]
    return found


async def polled(env: WorkflowEnvironment, task_queue: str) -> bool:
    request = DescribeTaskQueueRequest(
        namespace=env.client.namespace,
        task_queue=TaskQueue(name=task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    described = await env.client.workflow_service.describe_task_queue(request)
    return bool(described.pollers)


async def test_the_tutorials_worker_and_client_run_as_written(
    temporal_env: WorkflowEnvironment, tmp_path: Path, task_queue: str
) -> None:
    files = tutorial_files()
    assert sorted(files) == ["ask.py", "my_agents.py", "worker.py"]
    assert files["worker.py"].count(OPENAI) == 1, "the page's endpoint moved: update OPENAI"
    script = [
        assistant_calls(("get_weather", {"city": "Oslo"})),
        assistant_calls(("send_report", {"to": "ana@example.com", "text": "4C, rain"})),
        assistant_text('{"city": "Oslo", "weather": "4C, rain", "mailed_to": "ana@example.com"}'),
    ]
    with ScriptedProvider(script) as provider:
        here = f'ProviderEndpoint(base_url="{provider.base_url}", api_key_env=None)'
        files["worker.py"] = files["worker.py"].replace(OPENAI, here)
        for name, code in files.items():
            (tmp_path / name).write_text(code)
        environment = {
            **os.environ,
            "TEMPORAL_ADDRESS": address_of(temporal_env),
            "DURABLE_AGENT_TASK_QUEUE": task_queue,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        }
        worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "worker.py",
            cwd=tmp_path,
            env=environment,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            await wait_for(lambda: polled(temporal_env, task_queue), timeout=60)
            ask = await asyncio.create_subprocess_exec(
                sys.executable,
                "ask.py",
                cwd=tmp_path,
                env=environment,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(ask.communicate(), 120)
        finally:
            worker.terminate()
            said, _ = await worker.communicate()
    assert ask.returncode == 0, f"{out.decode()[-1500:]}\n{err.decode()[-6000:]}"
    assert worker.returncode is not None, said.decode()[-3000:]
    printed = out.decode().strip().splitlines()
    # the approval the program asked for, then the typed answer
    assert printed[0] == 'send_report {"to": "ana@example.com", "text": "4C, rain"}', printed
    assert printed[-1] == "city='Oslo' weather='4C, rain' mailed_to='ana@example.com'", printed
    sent = [m for m in provider.requests[2].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in sent] == ["4C, rain", "sent to ana@example.com"]
