"""docs/how-to/using.md's "From inside your own workflow", as it stands on the page: its
four blocks, put in one file in order, make the program a reader pastes (a workflow
that runs an agent inline, a client that approves its waiting calls with
``DecisionRequest(decision="approve")``, a worker on a dev server of its own), run in
a fresh interpreter against a scripted OpenAI-compatible model."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text

USING = Path(__file__).parents[2] / "docs" / "how-to" / "using.md"
MARK = "<!-- run by tests/temporal/test_inline_page.py -->"


def page_program() -> str:
    """The section's blocks marked as run here, in order, as one file."""
    text = USING.read_text()
    section = text[text.index("## From inside your own workflow") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(re.escape(MARK) + r"\n( *)```python\n(.*?)\n\1```", section, re.S)
    return "\n\n".join(textwrap.dedent(code) for _, code in blocks) + "\n"


def test_the_inline_run_with_a_person_approving_runs_as_the_page_shows(tmp_path: Path) -> None:
    """The page's client approves the call in the words ``DecisionRequest`` takes; the
    tool then runs (its result reaches the model) and the workflow answers with the
    typed verdict."""
    program = page_program()
    assert program.count("```") == 0 and "CheckedOrder" in program and "asyncio.run" in program
    script = [
        assistant_calls(("order_history", {"order_id": "o-1"})),
        assistant_text('{"fraud": true, "score": 0.9}'),
    ]
    (tmp_path / "checked_order.py").write_text(program)
    with ScriptedProvider(script) as provider:
        env = {**os.environ, "OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "sk-test"}
        ran = subprocess.run(
            [sys.executable, "checked_order.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=170,
            check=False,
        )
    assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]
    assert ran.stdout.strip().endswith("fraud=True score=0.9"), ran.stdout
    assert len(provider.requests) == 2
    tool_results = [m for m in provider.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_results] == ["o-1: 3 chargebacks in 30 days"]
