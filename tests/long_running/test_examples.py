"""The long-running examples run as written, with the built-in model."""

from __future__ import annotations

from pathlib import Path

import pytest

from durable_agent.capabilities import Memory, Workspace
from examples import research_workspace, support_memory
from tests.support.docs_page import run_page_block

PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "memory-and-workspaces.md"


async def test_the_support_agent_remembers_a_user_across_sessions() -> None:
    said = await support_memory.main()
    assert said == [
        "Thanks, I will remember that.",
        "From your file: on the Pro plan",
        "I have nothing on file for you yet.",
    ]


async def test_the_research_agent_drafts_its_report_in_its_workspace() -> None:
    answer = await research_workspace.main()
    assert "Sessions survive crashes; memory outlives them." in answer


def test_the_manuals_registration_makes_both_kinds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # its store lands in this test's own .data folder
    page = run_page_block("## Register them on the worker", page=PAGE)
    assert isinstance(page["memory"], Memory) and isinstance(page["workspace"], Workspace)
    assert page["registry"].kind("memory") is page["memory"]
    assert page["workspace"].store is page["memory"].store
    assert (tmp_path / ".data" / "memory.sqlite").exists()
