"""Forks: a session that begins with the first messages of another. The worker reads
them from the parent and stores them (the branch's history holds a reference, not the
messages); no model call or tool runs again for them; the parent is not touched; a
fork point inside a tool batch, or past the array, is refused before anything starts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._cli.branches import session_lines
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, Message
from durable_agent.testing import ScriptedProvider, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.project.test_cli import acli, address_of
from tests.support.agent_harness import record_history, running_worker, spec_for, wait_for
from tests.support.approval_fixtures import batch_then_text, payments_registry
from tests.support.browser import chromium_page, need_chromium
from tests.support.gateway_harness import gateway

TOOLS = ["transfer", "lookup"]


def said(messages: list[Message]) -> list[Any]:
    return [m.model_dump(mode="json", exclude={"timestamp", "usage"}) for m in messages]


def echo(request: RecordedRequest) -> AssistantMessage:
    """Says back the latest user message."""
    users = [m["content"] for m in request.body["messages"] if m["role"] == "user"]
    return assistant_text(f"you said {users[-1]}")


@asynccontextmanager
async def echo_gateway(
    env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> AsyncIterator[tuple[AgentClient, str]]:
    """A worker and a gateway serving the echo model's spec: the client, the base URL."""
    with ScriptedProvider(responder=echo) as provider:
        spec = tmp_path / "spec.json"
        spec.write_text(spec_for(provider, [], session={}).model_dump_json())
        async with running_worker(env, task_queue, Registry()) as client:
            with gateway(address_of(env), task_queue, spec) as base:
                yield AgentClient(client, task_queue=task_queue), base


async def started_with(client: Client, session: str) -> tuple[str, list[str]]:
    """The session's start input as history holds it, and the activities it ran."""
    start, ran = "", []
    async for event in client.get_workflow_handle(session).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            start = payloads[0].data.decode()
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            ran.append(event.activity_task_scheduled_event_attributes.activity_type.name)
    return start, ran


async def test_forks_at_several_points_of_a_session_with_tools_and_approvals(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    answer = batch_then_text(
        [("transfer", {"to": "ann", "amount": 5}), ("lookup", {"customer": "ann"})],
        [("lookup", {"customer": "bob"})],
    )

    def respond(request: RecordedRequest) -> AssistantMessage:
        return answer(request.body["messages"])

    ran: list[Any] = []
    with ScriptedProvider(responder=respond) as provider:
        spec = spec_for(provider, TOOLS, instructions="You pay.", session={})
        async with running_worker(temporal_env, task_queue, payments_registry(ran, [])) as client:
            agents = AgentClient(client, task_queue=task_queue)
            parent = await agents.start(spec, "pay ann", owner="alice")
            pending = await wait_for(lambda: agents.session(parent).pending_approvals(), timeout=60)
            await agents.session(parent).approve(pending[0].approval_id, by="alice")
            await agents.session(parent).wait(after=1, timeout=60)
            await agents.session(parent).send("check bob")
            await agents.session(parent).wait(after=6, timeout=60)
            before = await agents.session(parent).messages()
            assert len(before) == 10 and len(provider.requests) == 4
            assert len(ran) == 3

            # refused before anything starts: inside the first batch, and past the end
            with pytest.raises(ValueError, match="splits the tool batch of message 2"):
                await agents.session(parent).fork(4, spec)
            with pytest.raises(ValueError, match="has 10 messages"):
                await agents.session(parent).fork(11, spec)

            # after an answer, with a message: one new turn, nothing before it again
            later = await agents.session(parent).fork(6, spec, "check cy")
            await agents.session(later).wait(after=6, timeout=60)
            branch = await agents.session(later).messages()
            assert said(branch[:6]) == said(before[:6])
            assert branch[6].content == "check cy" and len(branch) == 10
            assert len(provider.requests) == 6 and len(ran) == 4  # its own lookup only

            # after the first user message, under new instructions: asked again at once,
            # and the transfer waits for a person in the branch alone
            careful = spec.model_copy(update={"instructions": "You pay carefully."})
            again = await agents.session(parent).fork(2, careful)
            waiting = await wait_for(lambda: agents.session(again).pending_approvals(), timeout=60)
            assert waiting[0].tool_name == "transfer"
            assert provider.requests[-1].body["messages"][0]["content"] == "You pay carefully."
            assert (await agents.session(again).messages())[0].content == "You pay carefully."
            assert await agents.session(parent).pending_approvals() == []
            assert len(ran) == 4

            # the parent is untouched; the branches' histories hold no parent message
            assert said(await agents.session(parent).messages()) == said(before)
            for branch_id in (later, again):
                start, activities = await started_with(client, branch_id)
                assert "sent 5 to ann" not in start and "good standing" not in start
                assert activities.count("forked_conversation") == 1
            assert (await agents.session(later).owner()) == "alice"

            # where branches part, and the listing as a tree
            parted = await agents.diff(parent, later)
            assert parted.common == 6
            assert parted.left[0].content == "check bob" and parted.right[0].content == "check cy"
            ours = f'WorkflowId = "{parent}" OR WorkflowId = "{later}"'  # (a shared server)
            listing = "\n".join(session_lines(await agents.sessions(where=f"({ours})")))
            assert f"  └ {later}" in listing and f"(from {parent} at 6)" in listing

            # the CLI's entry points
            address = address_of(temporal_env)
            spec_file = tmp_path / "spec.json"
            spec_file.write_text(spec.model_dump_json())
            made = await acli(
                "fork",
                parent,
                "--at",
                "6",
                "--spec",
                str(spec_file),
                "--message",
                "check dee",
                "--task-queue",
                task_queue,
                address=address,
            )
            assert made.returncode == 0, made.stderr
            third = made.stdout.strip()
            await agents.session(third).wait(after=6, timeout=60)
            shown = await acli("diff", later, third, "--task-queue", task_queue, address=address)
            assert shown.returncode == 0, shown.stderr
            assert shown.stdout.splitlines()[0] == "6 messages in common"
            assert "- [6] user: check cy" in shown.stdout
            assert "+ [6] user: check dee" in shown.stdout
            refused = await acli(
                "fork",
                parent,
                "--at",
                "3",
                "--spec",
                str(spec_file),
                "--task-queue",
                task_queue,
                address=address,
            )
            assert refused.returncode != 0 and "splits the tool batch" in refused.stderr
            await record_history(client.get_workflow_handle(later), "forked_session")
    assert ran[0] == ("transfer", {"to": "ann", "amount": 5})


async def test_a_fork_through_the_gateway(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    async with (
        echo_gateway(temporal_env, task_queue, tmp_path) as (agents, base),
        httpx.AsyncClient(base_url=base, timeout=60) as http,
    ):
        started = await http.post("/api/sessions", json={"message": "one"})
        parent = started.json()["session_id"]
        await agents.session(parent).wait(after=0, timeout=60)
        made = await http.post(f"/api/sessions/{parent}/fork", json={"at": 1, "message": "two"})
        assert made.status_code == 201, made.text
        branch = made.json()["session_id"]
        await agents.session(branch).wait(after=1, timeout=60)
        read = await http.get(f"/api/sessions/{branch}/messages")
        assert [m["content"] for m in read.json()] == ["one", "two", "you said two"]
        past = await http.post(f"/api/sessions/{parent}/fork", json={"at": 9})
        assert past.status_code == 422 and past.json()["field"] == "at", past.text
        listed = (await http.get("/api/sessions?limit=1000")).json()
        assert {
            "session_id": branch,
            "forked_from": parent,
            "forked_at": 1,
        }.items() <= (next(s for s in listed if s["session_id"] == branch).items())
        missing = await http.post("/api/sessions/nobody/fork", json={"at": 1})
        assert missing.status_code == 404
        parted = (await http.get(f"/api/sessions/{parent}/diff/{branch}")).json()
        assert parted["common"] == 1
        assert [m["content"] for m in parted["right"]] == ["two", "you said two"]
        unknown = await http.get(f"/api/sessions/{parent}/diff/nobody")
        assert unknown.status_code == 404


async def test_the_console_forks_a_session_and_shows_where_branches_part(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    need_chromium()

    async with echo_gateway(temporal_env, task_queue, tmp_path) as (agents, base):
        parent = await agents.start((tmp_path / "spec.json").read_text(), "one")
        await agents.session(parent).wait(after=0, timeout=60)
        async with chromium_page() as page:
            await page.goto(base)
            await page.click(f"#sessions li[data-session='{parent}']")
            await page.fill("#fork-at", "1")
            await page.fill("#fork-message", "two")
            await page.click("#fork-button")
            answer = page.locator("#transcript .assistant", has_text="you said two")
            await answer.wait_for(timeout=30_000)
            branch = await page.locator("#session-id").inner_text()
            assert branch != parent
            listed = page.locator(f"#sessions li.branch[data-session='{branch}']")
            assert f"from {parent} at 1" in await listed.inner_text()
            await page.fill("#diff-with", parent)
            await page.click("#diff-button")
            common = page.locator("#diff-common")
            await common.wait_for(timeout=30_000)
            assert await common.inner_text() == "1 messages in common"
            shown = await page.locator("#diff").inner_text()
            assert "[1] user: two" in shown and "[1] assistant: you said one" in shown
        assert [m.content for m in await agents.session(parent).messages()] == [
            "one",
            "you said one",
        ]
