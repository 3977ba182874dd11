"""The reminder agent of the wake-ups page and of ``examples/reminder_agent.py``, run as
a reader runs them: each sets a wake-up with its built-in model, says so, and reminds
when the wake-up falls due."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from tests.support.docs_page import run_page_block

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "how-to" / "wake-ups.md"


async def test_the_pages_reminder_agent_sets_a_wake_up_and_reminds_when_it_falls_due() -> None:
    program = run_page_block("## A reminder agent", page=PAGE)
    said = await program["main"]()
    assert said == ["I will remind you.", "Reminder: stretch."]


async def test_the_reminder_example_runs_with_its_built_in_model() -> None:
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "examples.reminder_agent"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["I will remind you.", "Reminder: stretch."]
