"""The owner's doors onto memories: ``durable-agent serve --memory-store`` answers
``/api/memory`` as its users' tenants allow, and ``durable-agent memory`` reads and
edits the store itself or goes through a gateway as a user. A user of another tenant
reads, searches and changes nothing of tenant A's, through REST or the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import httpx
from temporalio.testing import WorkflowEnvironment

from durable_agent._spec.tools import ToolContext
from durable_agent.capabilities import Memory, Workspace
from durable_agent.capabilities._memory import MemoryTool, Scope
from durable_agent.capabilities._workspace import WorkspaceTool
from tests.support.browser import chromium_page, need_chromium
from tests.support.gateway_harness import ROOT, gateway

ALICE_TOKEN, BOB_TOKEN = "alice-token-0123456789", "bob-token-0123456789ab"
TOKENS = f"alice={ALICE_TOKEN},bob={BOB_TOKEN}"
ALICE_SPACE = "users/token:alice"


async def seed(url: str) -> None:
    kind = Memory(url, {"notes": "users/{user}"})
    files = Workspace(kind, {"notes": "users/{user}"})
    scope = Scope(user="token:alice", tenant="token:alice", session="s-1")
    context = ToolContext(
        session_id="s-1", turn=1, slot=0, tool_call_id="c", idempotency_key="s-1:1:0"
    )
    tool = MemoryTool(source="notes", tool="remember")
    await kind.serve(tool, {"key": "plan", "text": "Alice is on the Pro plan"}, context, scope)
    write = WorkspaceTool(source="notes", tool="write_file")
    draft = {"path": "/report.md", "content": "# Alice's report"}
    await files.serve(write, draft, replace(context, idempotency_key="s-1:1:1"), scope)
    await kind.store.close()


def cli(*args: str, **variables: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **variables}
    return subprocess.run(
        [sys.executable, "-m", "durable_agent._cli.main", "memory", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_another_tenant_reaches_nothing_through_rest_or_the_cli(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'memory.sqlite'}"
    await seed(url)
    address = str(temporal_env.client.service_client.config.target_host)
    bearer = {
        n: {"Authorization": f"Bearer {t}"} for n, t in (("alice", ALICE_TOKEN), ("bob", BOB_TOKEN))
    }
    item = {"namespace": ALICE_SPACE, "key": "plan"}
    with gateway(
        address, task_queue, None, "--memory-store", url, DURABLE_AGENT_GATEWAY_TOKENS=TOKENS
    ) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            for _ in range(100):  # the gateway takes a moment to answer
                try:
                    await http.get("/healthz")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
            mine = (await http.get("/api/memory", headers=bearer["alice"])).json()
            found = await http.get(
                "/api/memory/search",
                params={"namespace": ALICE_SPACE, "q": "plan"},
                headers=bearer["alice"],
            )
            theirs = (await http.get("/api/memory", headers=bearer["bob"])).json()
            refused = [
                await http.get("/api/memory/item", params=item, headers=bearer["bob"]),
                await http.get(
                    "/api/memory/search",
                    params={"namespace": ALICE_SPACE, "q": "plan"},
                    headers=bearer["bob"],
                ),
                await http.get("/api/memory", params=item, headers=bearer["bob"]),
                await http.put(
                    "/api/memory/item", json={**item, "text": "hijacked"}, headers=bearer["bob"]
                ),
                await http.delete("/api/memory/item", params=item, headers=bearer["bob"]),
            ]
            report = {"namespace": ALICE_SPACE, "path": "/report.md"}
            listed = await http.get(
                "/api/workspace", params={"namespace": ALICE_SPACE}, headers=bearer["alice"]
            )
            downloaded = await http.get(
                "/api/workspace/file", params=report, headers=bearer["alice"]
            )
            refused += [
                await http.get(
                    "/api/workspace", params={"namespace": ALICE_SPACE}, headers=bearer["bob"]
                ),
                await http.get("/api/workspace/file", params=report, headers=bearer["bob"]),
            ]
            console = (await http.get("/")).text
            nobody = await http.get("/api/memory")
            through_cli = await asyncio.to_thread(
                cli,
                "get",
                "--namespace",
                ALICE_SPACE,
                "--key",
                "plan",
                "--gateway",
                base,
                DURABLE_AGENT_GATEWAY_TOKEN=BOB_TOKEN,
            )
            edited = await http.put(
                "/api/memory/item",
                json={**item, "text": "Alice moved to Team"},
                headers=bearer["alice"],
            )
    assert [m["key"] for m in mine] == ["plan"] and found.json()[0]["key"] == "plan"
    assert theirs == []
    assert [r.status_code for r in refused] == [404] * 7
    assert [f["path"] for f in listed.json()] == ["/report.md"]
    assert downloaded.text == "# Alice's report"
    assert 'filename="report.md"' in downloaded.headers["content-disposition"]
    for path in ("/api/memory?", "/api/workspace?", "/api/workspace/file?", "/api/memory/item?"):
        assert path in console  # the console's memory panel asks these
    assert nobody.status_code == 401
    assert through_cli.returncode != 0 and "404" in through_cli.stderr + through_cli.stdout
    assert edited.json() == {"memory": "updated"}
    owner = await asyncio.to_thread(cli, "list", "--store", url)
    [kept] = json.loads(owner.stdout)
    assert (kept["namespace"], kept["text"]) == (ALICE_SPACE, "Alice moved to Team")


async def test_the_owner_edits_and_deletes_in_the_store_from_the_cli(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memory.sqlite'}"
    await seed(url)
    where = ("--store", url, "--namespace", ALICE_SPACE, "--key", "plan")
    put = await asyncio.to_thread(cli, "put", *where, "--text", "On the Team plan")
    search = await asyncio.to_thread(
        cli, "search", "--store", url, "--namespace", ALICE_SPACE, "--query", "team"
    )
    deleted = await asyncio.to_thread(cli, "delete", *where)
    gone = await asyncio.to_thread(cli, "get", *where)
    assert json.loads(put.stdout) == {"memory": "updated"}
    assert json.loads(search.stdout)[0]["text"] == "On the Team plan"
    assert json.loads(deleted.stdout) == {"memory": "deleted"}
    assert gone.returncode != 0 and "no memory 'plan'" in gone.stderr


async def test_the_owner_reads_edits_and_deletes_a_memory_in_the_console(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """The console's panel, as a person uses it in Chromium: the namespace's memories
    and files listed, a memory's text edited and then deleted, in the store itself."""
    need_chromium()
    url = f"sqlite:///{tmp_path / 'memory.sqlite'}"
    await seed(url)
    address = str(temporal_env.client.service_client.config.target_host)
    with gateway(
        address, task_queue, None, "--memory-store", url, DURABLE_AGENT_GATEWAY_TOKENS=TOKENS
    ) as base:
        async with chromium_page() as page:
            await page.add_init_script(
                f"sessionStorage.setItem('durable-agent-token', '{ALICE_TOKEN}')"
            )
            await page.goto(base)
            await page.click("#memory summary")  # the panel opens as a person opens it
            await page.fill("#memory-namespace", ALICE_SPACE)
            await page.press("#memory-namespace", "Enter")
            row = page.locator("#memory-list li", has_text="plan:")
            await row.wait_for(timeout=30_000)
            listed = await row.inner_text()
            files = await page.locator("#workspace-list li").inner_text()
            page.once("dialog", lambda dialog: dialog.accept("Alice moved to Team"))
            await row.get_by_role("button", name="edit").click()
            await page.locator("#memory-list li", has_text="Alice moved to Team").wait_for(
                timeout=30_000
            )
            edited = json.loads((await asyncio.to_thread(cli, "list", "--store", url)).stdout)
            await page.locator("#memory-list li", has_text="plan:").get_by_role(
                "button", name="delete"
            ).click()
            await page.wait_for_function(
                "() => document.querySelectorAll('#memory-list li').length === 0",
                timeout=30_000,
            )
            left = json.loads((await asyncio.to_thread(cli, "list", "--store", url)).stdout)
    assert "Alice is on the Pro plan" in listed
    assert "/report.md" in files
    assert [(m["key"], m["text"]) for m in edited] == [("plan", "Alice moved to Team")]
    assert left == []
