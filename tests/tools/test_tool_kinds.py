"""Tool kinds: the manual's webhook kind, registered as written, lists its tools and
runs its calls through a real worker and workflow over real HTTP; a toolset the worker
does not know fails the session at its start, and a call a forged input points
elsewhere never leaves the worker. Tools and calls recorded before kinds existed (one
optional field per kind) read back as their kind's target."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest
from durable_agent._activities.tools import ToolActivities
from pydantic import ValidationError
from temporalio.client import WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.boundary import ResolvedTool, ToolCallInput
from durable_agent._errors import Failure
from durable_agent._spec.document import AgentSpec
from durable_agent._spec.tool_kinds import (
    CallTarget,
    FunctionTarget,
    HandoffTarget,
    HttpCall,
    HttpOperation,
    McpCall,
    McpTarget,
    OtherTarget,
    SubAgentTarget,
    ToolKind,
    ToolTarget,
    UnknownToolKind,
)
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import ToolMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from tests.support.agent_harness import record_history, running_worker, spec_for
from tests.support.docs_page import page_block, run_page_block
from tests.support.recording_server import RecordingServer

SECTION = "## A new tool kind"


def webhooks(url: str) -> tuple[Registry, ToolTarget]:
    """A worker's registry with the page's kind for hooks at ``url`` (added again, the
    same kind replaces the page's own), and the target of its ``page_oncall`` hook."""
    page = run_page_block(SECTION)
    kind = page["Webhooks"]({"ops": {"page_oncall": f"{url}/page", "other": url}})
    hook: ToolTarget = page["Hook"](source="ops", hook="page_oncall")
    return Registry([kind]), hook


async def failure_of(
    env: WorkflowEnvironment, task_queue: str, spec: AgentSpec, registry: Registry | None = None
) -> ApplicationError:
    """Why a session of ``spec`` failed (it must)."""
    async with running_worker(env, task_queue, registry or Registry()) as client:
        agents = AgentClient(client, task_queue=task_queue)
        session = await agents.start(spec, "hello")
        with pytest.raises(WorkflowFailureError) as failed:
            await agents.session(session).result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    return cause


async def test_the_pages_kind_lists_and_runs_its_tools_in_a_session(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    script = [
        assistant_calls(("ops_page_oncall", {"text": "disk full"})),
        assistant_text("Paged."),
    ]
    with RecordingServer() as hooks, ScriptedProvider(script) as provider:
        registry, _ = webhooks(hooks.url)
        toolsets = json.loads(page_block(SECTION, "json"))["toolsets"]
        spec = spec_for(provider, [], toolsets=toolsets)
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "the disk is full")
            result = await agents.session(session).result()
            messages = await agents.session(session).messages()
            await record_history(client.get_workflow_handle(session), "tool_kind_webhook")
    assert result.status == "done"
    [seen] = hooks.seen
    assert (seen.method, seen.path) == ("POST", "/page")
    assert json.loads(seen.body) == {"text": "disk full"}
    assert seen.headers["Idempotency-Key"] == f"{session}:1:0"
    [answer] = [m for m in messages if isinstance(m, ToolMessage)]
    assert answer.content == "HTTP 200" and not answer.is_error
    offered = [t["function"]["name"] for t in provider.requests[0].body["tools"]]
    assert offered == ["ops_page_oncall"]  # allowed_tools left "other" out


@pytest.mark.parametrize(
    ("toolset", "words"),
    [
        ({"kind": "webhook", "name": "billing"}, "no webhooks named 'billing' on this worker"),
        (
            {"kind": "webhook", "name": "ops", "allowed_tools": ["wipe"]},
            "allowed_tools names tools it does not have: wipe",
        ),
    ],
)
async def test_a_toolset_the_worker_does_not_know_fails_the_session_by_name(
    temporal_env: WorkflowEnvironment, task_queue: str, toolset: dict[str, Any], words: str
) -> None:
    with RecordingServer() as hooks, ScriptedProvider([assistant_text("never")]) as provider:
        registry, _ = webhooks(hooks.url)
        spec = spec_for(provider, [], toolsets=[toolset])
        cause = await failure_of(temporal_env, task_queue, spec, registry)
    assert cause.type == Failure.TOOLSET_UNAVAILABLE
    assert f"toolset {toolset['name']!r} ({toolset['kind']})" in cause.message
    assert words in cause.message
    assert provider.requests == [] and hooks.seen == []  # no model call, no hook


async def test_a_call_pointed_at_a_hook_the_worker_lacks_never_leaves_it() -> None:
    """A call input is anyone's to write (a forged continue-as-new input): the kind looks
    its URL up again and refuses a hook its owner did not register."""
    with RecordingServer() as hooks:
        registry, hook = webhooks(hooks.url)
        forged = hook.model_copy(update={"hook": "exfiltrate"})
        call = ToolCallInput(
            turn=1,
            slot=0,
            tool_name="ops_page_oncall",
            tool_call_id="c0",
            arguments='{"text": "x"}',
            target=forged,
        )
        worker = ActivityEnvironment()  # the tool's own limit: 60 s, as a workflow gives it
        worker.info = dataclasses.replace(worker.info, start_to_close_timeout=timedelta(seconds=65))
        result = await worker.run(ToolActivities(registry).run_tool, call)
        sent = call.model_copy(update={"target": hook})
        ran = await worker.run(ToolActivities(registry).run_tool, sent)
        elsewhere = await worker.run(ToolActivities(Registry()).run_tool, sent)
    assert result.is_error
    assert result.content == "Not allowed on this worker: no webhook ops/exfiltrate on this worker"
    assert ran.content == "HTTP 200"
    assert elsewhere.is_error and "no tool kind 'webhook' on this worker" in elsewhere.content
    assert [s.path for s in hooks.seen] == ["/page"]  # only the registered hook was reached


async def test_a_toolset_of_a_kind_the_worker_lacks_is_not_admitted(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("never")]) as provider:
        spec = spec_for(provider, [], toolsets=[{"kind": "fax", "name": "ops"}])
        cause = await failure_of(temporal_env, task_queue, spec)
    assert cause.type == Failure.NOT_ADMITTED
    assert "toolsets[ops]: no tool kind 'fax' on this worker (registered: agent, " in cause.message
    assert provider.requests == []


async def test_a_spec_cannot_loosen_what_an_owners_kind_gates(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    """An owner's kind lists its hook as needing a person: the call waits, and once
    denied the hook is never reached. A spec has no way to say ``never`` for it (its
    ``tools`` settings name the worker's functions only): trying fails the session
    before the model is asked."""
    script = [assistant_calls(("ops_page_oncall", {"text": "disk full"})), assistant_text("ok")]
    with RecordingServer() as hooks, ScriptedProvider(script) as provider:
        page = run_page_block(SECTION)

        class GatedWebhooks(page["Webhooks"]):  # type: ignore[misc, name-defined]
            async def list_tools(self, source: Any, worker: Any) -> list[ResolvedTool]:
                gated = {"approval": "always"}
                return [
                    t.model_copy(update={"policy": t.policy.model_copy(update=gated)})
                    for t in await super().list_tools(source, worker)
                ]

        registry = Registry([GatedWebhooks({"ops": {"page_oncall": f"{hooks.url}/page"}})])
        toolsets = [{"kind": "webhook", "name": "ops"}]
        loosened = spec_for(
            provider, [{"name": "ops_page_oncall", "approval": "never"}], toolsets=toolsets
        )
        cause = await failure_of(temporal_env, task_queue, loosened, registry)
        assert provider.requests == [] and hooks.seen == []
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = agents.session(
                await agents.start(spec_for(provider, [], toolsets=toolsets), "hi")
            )
            outcome = await session.wait(timeout=60)
            assert outcome.kind == "approval", outcome
            [pending] = outcome.pending
            assert pending.tool_name == "ops_page_oncall"
            assert hooks.seen == []  # waiting, not run
            await session.deny(pending.approval_id, by="ana", reason="not now")
            result = await session.result()
    assert "ops_page_oncall" in cause.message
    assert result.status == "done"
    assert hooks.seen == []  # denied: the hook was never reached


def test_tools_recorded_before_kinds_read_back_as_their_targets() -> None:
    """Histories and running sessions hold the old shape (``mcp``, ``http``, ``agent``,
    ``handoff`` fields) forever."""
    base = {"definition": {"name": "t"}, "policy": {}}
    operation = {"api": "orders", "method": "GET", "url": "http://h/o/{id}", "path": ["id"]}
    old = {
        "mcp": {"server": "files", "tool": "read"},
        "http": operation,
        "agent": "researcher",
        "handoff": {"to": None},
    }
    expected = [
        McpTarget(server="files", tool="read"),
        HttpOperation(**operation),
        SubAgentTarget(agent="researcher"),
        HandoffTarget(to=None),
    ]
    for (field, value), target in zip(old.items(), expected, strict=True):
        tool = ResolvedTool.model_validate({**base, field: value})
        assert tool.target == target
        assert json.loads(tool.model_dump_json())["target"]["kind"] == target.kind
    assert ResolvedTool.model_validate(base).target == FunctionTarget()
    server = {"name": "files", "command": "mcp-files"}
    call = {"turn": 1, "slot": 0, "tool_name": "t", "tool_call_id": "c", "arguments": "{}"}
    old_mcp = ToolCallInput.model_validate({**call, "mcp": {"server": server, "tool": "read"}})
    assert isinstance(old_mcp.target, McpCall) and old_mcp.target.server.command == "mcp-files"
    old_http = ToolCallInput.model_validate({**call, "http": {"operation": operation}})
    assert old_http.target == HttpCall(operation=HttpOperation(**operation))


def test_every_target_survives_the_payload_converter_and_its_worker_reads_it_as_its_kind() -> None:
    """Built-in targets come back as their own models anywhere; a kind's own target comes
    back with every field (the session and client have no code of the kind), and the
    worker whose registry has the kind reads it as the kind's model."""
    converter = pydantic_data_converter.payload_converter
    registry, hook = webhooks("http://127.0.0.1:9")
    targets: list[ToolTarget] = [
        FunctionTarget(),
        McpTarget(server="files", tool="read"),
        HttpOperation(api="orders", method="POST", url="http://h/o", body=True),
        SubAgentTarget(agent="researcher"),
        HandoffTarget(to="billing"),
        hook,
    ]
    tools = [
        ResolvedTool(definition={"name": f"t{k}"}, policy={}, target=t)
        for k, t in enumerate(targets)
    ]  # type: ignore[arg-type]
    [back] = converter.from_payloads(converter.to_payloads([tools]), [list[ResolvedTool]])
    assert [t.target for t in back[:-1]] == targets[:-1]
    assert [type(t.target) for t in back[:-1]] == [type(t) for t in targets[:-1]]
    kept = back[-1].target
    assert isinstance(kept, OtherTarget) and kept.model_dump() == hook.model_dump()
    kind, read = registry.call_of(kept)
    assert kind.name == "webhook" and read == hook and type(read) is type(hook)
    call = {"turn": 1, "slot": 0, "tool_name": "t", "tool_call_id": "c", "arguments": "{}"}
    with_call = ToolCallInput(**call, target=hook)  # type: ignore[arg-type]
    [read_call] = converter.from_payloads(converter.to_payloads([with_call]), [ToolCallInput])
    assert read_call.target is not None and registry.call_of(read_call.target)[1] == hook


def test_a_kind_a_worker_lacks_is_refused_naming_the_ones_it_has() -> None:
    registry = Registry()
    with pytest.raises(UnknownToolKind) as refused:
        registry.kind("fax")
    text = str(refused.value)
    assert "no tool kind 'fax' on this worker (registered: " in text
    assert "agent, function, handoff, mcp, openapi" in text
    with pytest.raises(UnknownToolKind, match="no tool kind 'fax'"):
        registry.call_of(CallTarget.model_validate({"kind": "fax"}))
    with pytest.raises(ValidationError, match="needs its 'kind'"):
        ResolvedTool.model_validate({"definition": {"name": "t"}, "policy": {}, "target": {}})
    with pytest.raises(ValueError, match="tool kind 'mcp' is registered already"):
        registry.add(_Impostor())  # another kind under a taken name
    with pytest.raises(ValueError, match="'inline': a registered kind runs on a worker"):
        registry.add(_InWorkflow())  # the workflow would not know how to run it
    with pytest.raises(ValueError, match="'fancy' sets call"):
        registry.add(_WithCall())  # the session would not know how to make its calls


class _Impostor(ToolKind[McpTarget, McpTarget]):
    name = "mcp"
    target = McpTarget


class _InWorkflow(ToolKind[McpTarget, McpTarget]):
    name = "inline"
    target = McpTarget
    runs_in = "session"


class _WithCall(ToolKind[McpTarget, McpCall]):
    name = "fancy"
    target = McpTarget
    call = McpCall


def test_a_spec_with_the_old_source_lists_reads_as_toolsets() -> None:
    """Specs (and every history) written with ``mcp_servers`` and ``openapi`` lists read
    as ``toolsets`` entries of those kinds, in the same order, and write back in the new
    shape, each entry with its kind (what it is read back by)."""
    old = {
        "model": {"name": "m"},
        "mcp_servers": ["files", {"name": "crm", "url": "https://crm.example/mcp"}],
        "openapi": [{"name": "orders", "operations": ["getOrder"]}],
        "toolsets": [{"kind": "webhook", "name": "ops"}],
    }
    spec = AgentSpec.model_validate(old)
    assert [(t.kind, t.name) for t in spec.toolsets] == [
        ("mcp", "files"),
        ("mcp", "crm"),
        ("openapi", "orders"),
        ("webhook", "ops"),
    ]
    written = json.loads(spec.model_dump_json(exclude_defaults=True))
    assert "mcp_servers" not in written and "openapi" not in written
    assert written["toolsets"][0] == {"kind": "mcp", "name": "files"}
    assert AgentSpec.model_validate(written) == spec
    with pytest.raises(ValidationError, match="'files' is listed more than once"):
        AgentSpec.model_validate({**old, "toolsets": [{"kind": "webhook", "name": "files"}]})
