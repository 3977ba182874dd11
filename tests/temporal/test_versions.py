"""Versioned workers: two builds of the worker on one task queue, with the dev server's
worker deployments. A pinned session stays on the build that started it while new
sessions start on the build made current; an auto-upgrading session finishes its tool
batch on its own build and goes on at the next turn boundary on the new one (continue-
as-new: nothing replays on the other build); a person moves a pinned session; the CLI
lists sessions per build, makes a build current and moves sessions."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._connection import versioned
from durable_agent._spec.endpoints import ProviderLimits, limiter_id
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.project.test_cli import acli, address_of
from tests.providers.test_provider_limits import capabilities, limiter_ledger, named_spec, registry
from tests.support.agent_harness import record_history, running_worker, spec_for, wait_for
from tests.support.browser import chromium_page, need_chromium
from tests.support.gateway_harness import gateway


def builds_model(request: RecordedRequest) -> AssistantMessage:
    """Asks ``build`` twice per message (holding the first call when the message says
    "hold"), then answers with what the two calls said."""
    messages = request.body["messages"]
    since = max(k for k, m in enumerate(messages) if m["role"] == "user")
    results = [m["content"] for m in messages[since:] if m["role"] == "tool"]
    if len(results) < 2:
        hold = not results and "hold" in messages[since]["content"]
        return assistant_calls(("build", {"hold": hold}))
    return assistant_text("ran on " + ", ".join(results))


def registry_of(name: str, reached: asyncio.Event, release: asyncio.Event) -> Registry:
    """A build's tools: ``build`` says which build ran it (held until ``release``)."""
    registry = Registry()

    @tool(registry=registry)
    async def build(hold: bool = False) -> str:
        """The worker build running this call."""
        if hold:
            reached.set()
            await release.wait()
        return name

    return registry


async def test_sessions_stay_on_their_build_and_move_at_a_turn_boundary(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    deployment = f"agents-{uuid.uuid4().hex[:8]}"
    v1, v2 = f"{deployment}:v1", f"{deployment}:v2"
    reached, release = asyncio.Event(), asyncio.Event()
    address = address_of(temporal_env)
    with ScriptedProvider(responder=builds_model) as provider:
        auto = spec_for(provider, ["build"], session={"upgrade": "auto"})
        pinned = spec_for(provider, ["build"], session={"upgrade": "pinned"})
        old = {"deployment": versioned("v1", deployment)}
        async with running_worker(
            temporal_env, task_queue, registry_of("v1", reached, release), **old
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)

            async def current(version: str) -> bool:
                """Make it current once its workers poll (the server must have seen them)."""
                try:
                    await agents.versions.make_current(version)
                except ValueError:
                    return False
                return await agents.versions.current(deployment) == version

            await wait_for(lambda: current(v1))

            async def ask(session: str, text: str) -> str:
                before = await agents.session(session).send(text)
                outcome = await agents.session(session).wait(after=before, timeout=60)
                assert outcome.kind == "reply", outcome
                return outcome.reply.content if outcome.reply else ""

            still = await agents.start(pinned, "which build?")
            mover = await agents.start(auto, "which build?")
            idle = await agents.start(auto, "which build?")
            for session in (still, mover, idle):
                await agents.session(session).wait(after=0, timeout=60)
                assert (await agents.session(session).messages())[-1].content == "ran on v1, v1"
                status = await agents.session(session).status()
                assert status.version == v1 and status.runs == 1
            assert (await agents.session(still).status()).upgrade == "pinned"
            first_run = (await client.get_workflow_handle(mover).describe()).run_id
            # the auto session's next reply starts on v1; its first call waits there
            before = await agents.session(mover).send("hold: which build now?")
            await asyncio.wait_for(reached.wait(), 60)

            new = {"deployment": versioned("v2", deployment)}
            async with running_worker(
                temporal_env, task_queue, registry_of("v2", reached, release), **new
            ):
                await wait_for(lambda: current(v2))
                # told of the new build, the idle auto session moved without a message
                asked = len(provider.requests)

                async def moved_idle() -> bool:
                    return (await agents.session(idle).status()).version == v2

                await wait_for(moved_idle, timeout=60)
                assert (await agents.session(idle).status()).runs == 2 and len(
                    provider.requests
                ) == asked
                assert (await agents.session(still).status()).version == v1
                release.set()
                # the held batch finished on v1; the next model call was on v2
                outcome = await agents.session(mover).wait(after=before, timeout=60)
                assert outcome.reply is not None and outcome.reply.content == "ran on v1, v2"
                moved = await agents.session(mover).status()
                assert (moved.version, moved.runs) == (v2, 2)
                messages = await agents.session(mover).messages()
                assert len(messages) == 12  # nothing lost, nothing twice
                assert [m.content for m in messages[8:11:2]] == ["v1", "v2"]
                await record_history(
                    client.get_workflow_handle(mover, run_id=first_run), "moved_to_current_build"
                )
                # new sessions start on v2; the pinned one stays on v1
                fresh = await agents.start(auto, "which build?")
                await agents.session(fresh).wait(after=0, timeout=60)
                assert (await agents.session(fresh).messages())[-1].content == "ran on v2, v2"
                assert await ask(still, "and now?") == "ran on v1, v1"
                assert (await agents.session(still).status()).version == v1

                listed = await acli("versions", "--deployment", deployment, address=address)
                assert listed.returncode == 0, listed.stderr
                by_build = _sections(listed.stdout)
                assert by_build[v1] == [still]
                assert set(by_build[f"{v2} (current)"]) == {mover, fresh, idle}
                assert f"current build of {deployment}: {v2}" in listed.stdout
                status_text = await acli("status", still, address=address)
                assert f"build:          {v1} (pinned)" in status_text.stdout
                await _console_shows(address, task_queue, still, f"build {v1} (pinned)")

                # a person moves the pinned session: idle, it goes at once
                moving = await acli(
                    "versions", "move", "--from", "v1", "--deployment", deployment, address=address
                )
                assert moving.returncode == 0, moving.stderr
                assert f"1 sessions move at their next turn boundary\n  {still}" in moving.stdout

                async def on_v2() -> bool:
                    return (await agents.session(still).status()).version == v2

                await wait_for(on_v2, timeout=60)
                assert await ask(still, "and now?") == "ran on v2, v2"
                assert (await agents.session(still).status()).move_requested is False
                assert len(await agents.session(still).messages()) == 18
    # each reply asked the model three times; nothing was asked again after a move
    assert len(provider.requests) == 3 * 7


def _sections(listing: str) -> dict[str, list[str]]:
    """``versions``' listing: the sessions under each build's heading."""
    found: dict[str, list[str]] = {}
    heading = ""
    for line in listing.splitlines()[1:]:
        if line.startswith("  "):
            found[heading].append(line.split()[0])
        else:
            heading = line.split(": ")[0]
            found[heading] = []
    return found


async def test_the_cli_refuses_a_build_without_workers_and_bad_requests(
    temporal_env: WorkflowEnvironment,
) -> None:
    address = address_of(temporal_env)
    deployment = f"agents-{uuid.uuid4().hex[:8]}"
    missing = await acli(
        "versions", "current", "nothing", "--deployment", deployment, address=address
    )
    assert missing.returncode == 2
    assert f"cannot make {deployment}:nothing current" in missing.stderr
    both = await acli("versions", "move", "s1", "--from", "v1", address=address)
    assert both.returncode == 2 and "not both" in both.stderr
    listed = await acli("versions", "--deployment", deployment, address=address)
    assert listed.returncode == 0 and f"current build of {deployment}: none" in listed.stdout
    # a worker's build is named without the ':' that joins it to its deployment
    joined = await acli("worker", "--build-id", "v1:2", address=address)
    assert joined.returncode == 2 and "'v1:2': not empty, and without ':'" in joined.stderr


async def test_a_limiter_moves_to_the_current_build_and_serves_after_the_old_one_stops(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """The shared-limit workflow outlives builds: made current, the new build's limiter
    run takes over (the old one is woken to hand over), and calls go on with the old
    build's workers gone."""
    deployment = f"agents-{uuid.uuid4().hex[:8]}"
    key = f"limited-{task_queue}"
    with ScriptedProvider(responder=lambda request: assistant_text("ok")) as provider:
        limits = ProviderLimits(requests_per_minute=600)
        owned = capabilities(key, provider, limits)
        new = {"deployment": versioned("v2", deployment), "capabilities": owned}
        old = {"deployment": versioned("v1", deployment), "capabilities": owned}
        async with running_worker(temporal_env, task_queue, registry, **new) as client:
            agents = AgentClient(client, task_queue=task_queue)
            limiter = client.get_workflow_handle(limiter_id(key, limits))

            async def made(version: str) -> bool:
                try:
                    await agents.versions.make_current(f"{deployment}:{version}")
                except ValueError:
                    return False
                return True

            async def limiter_on(build: str) -> bool:
                info = (await limiter.describe()).raw_description.workflow_execution_info
                return info.versioning_info.deployment_version.build_id == build

            async with running_worker(temporal_env, task_queue, registry, **old):
                await wait_for(lambda: made("v1"))
                first = await agents.start(named_spec(key), "hi")
                assert (await agents.session(first).result()).status == "done"
                assert await limiter_on("v1")
                old_run = (await limiter.describe()).run_id
                await wait_for(lambda: made("v2"))
                await wait_for(lambda: limiter_on("v2"), timeout=60)
                moved = client.get_workflow_handle(limiter_id(key, limits), run_id=old_run)
                await record_history(moved, "limiter_moved")
            # the v1 workers are gone: the limiter and the sessions answer on v2
            second = await agents.start(named_spec(key), "hi again")
            assert (await agents.session(second).result()).status == "done"
            assert (await agents.session(second).status()).version == f"{deployment}:v2"
            ledger = await limiter_ledger(client, key)
    assert len(provider.requests) == 2
    assert ledger["requests_in_window"] >= 2  # the book went on with the limiter


async def _console_shows(address: str, task_queue: str, session: str, build: str) -> None:
    """The web console, opened on ``session``, names the build running it."""
    need_chromium()
    with gateway(address, task_queue, None) as base:
        async with chromium_page() as page:
            await page.goto(base)
            await page.evaluate("(id) => open(id)", session)
            shown = page.locator("#build", has_text=build)
            await shown.wait_for(timeout=30_000)
            assert await page.locator("#session-id").inner_text() == session
