"""The README's example, run as written in a fresh interpreter (its ``@tool`` functions
register themselves there), against the test's dev server and a scripted model: only
where the model lives is changed."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.project.test_cli import address_of

ROOT = Path(__file__).parent.parent.parent

RUNNER = """

import asyncio
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter


async def _run() -> None:
    await main(await Client.connect({address!r}, data_converter=pydantic_data_converter))


asyncio.run(_run())
"""


def readme_example() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme[readme.index("## An example") :].split("```python\n", 1)[1].split("```", 1)[0]


async def test_the_readme_example_asks_for_an_approval_and_answers_typed(
    temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    script = [
        assistant_calls(("get_weather", {"city": "Oslo"})),
        assistant_calls(("send_report", {"to": "ana@example.com", "text": "4C, rain"})),
        assistant_text('{"city": "Oslo", "weather": "4C, rain", "mailed_to": "ana@example.com"}'),
    ]
    with ScriptedProvider(script) as provider:
        example = readme_example()
        assert 'base_url="https://api.openai.com/v1", api_key_env="OPENAI_API_KEY"' in example
        example = example.replace("https://api.openai.com/v1", provider.base_url)
        example = example.replace('api_key_env="OPENAI_API_KEY"', "api_key_env=None")
        program = tmp_path / "example.py"
        runner = RUNNER.format(address=address_of(temporal_env))
        program.write_text(example + textwrap.dedent(runner))
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(program),
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            # a crash (it segfaulted once in CI, with nothing on stderr) shows its stacks
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
        out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, f"{out.decode()[-1500:]}\n{err.decode()[-6000:]}"
    printed = out.decode().strip().splitlines()  # the worker's log lines, then the print
    # the typed answer, printed as the Report it is
    assert printed[-1] == "city='Oslo' weather='4C, rain' mailed_to='ana@example.com'", printed[-5:]
    sent = [m for m in provider.requests[2].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in sent] == ["4C, rain", "sent to ana@example.com"]
