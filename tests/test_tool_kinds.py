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
from durable_agent.activities.tools import ToolActivities
from pydantic import ValidationError
from temporalio.client import WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent.core import (
    NOT_ADMITTED,
    TOOLSET_UNAVAILABLE,
    AgentSpec,
    ResolvedTool,
    ToolCallInput,
    ToolMessage,
)
from durable_agent.core.tool_kinds import (
    CallTarget,
    FunctionTarget,
    HandoffTarget,
    HttpCall,
    HttpOperation,
    McpCall,
    McpTarget,
    SubAgentTarget,
    ToolKind,
    ToolTarget,
    register_tool_kind,
)
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.tools import ToolRegistry
from tests.support.agent_harness import record_history, running_worker, spec_for
from tests.support.docs_page import page_block, run_page_block
from tests.support.recording_server import RecordingServer

SECTION = "## A new tool kind"


def webhooks(url: str) -> ToolTarget:
    """The page's kind, registered for hooks at ``url`` (a second registration of the
    same kind replaces the page's own)."""
    page = run_page_block(SECTION)
    register_tool_kind(page["Webhooks"]({"ops": {"page_oncall": f"{url}/page", "other": url}}))
    hook: ToolTarget = page["Hook"](source="ops", hook="page_oncall")
    return hook


async def failure_of(
    env: WorkflowEnvironment, task_queue: str, spec: AgentSpec
) -> ApplicationError:
    """Why a session of ``spec`` failed (it must)."""
    async with running_worker(env, task_queue, ToolRegistry()) as client:
        agents = AgentClient(client, task_queue=task_queue)
        session = await agents.start(spec, "hello")
        with pytest.raises(WorkflowFailureError) as failed:
            await agents.result(session)
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
        webhooks(hooks.url)
        toolsets = json.loads(page_block(SECTION, "json"))["toolsets"]
        spec = spec_for(provider, [], toolsets=toolsets)
        async with running_worker(temporal_env, task_queue, ToolRegistry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "the disk is full")
            result = await agents.result(session)
            messages = await agents.messages(session)
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
        webhooks(hooks.url)
        spec = spec_for(provider, [], toolsets=[toolset])
        cause = await failure_of(temporal_env, task_queue, spec)
    assert cause.type == TOOLSET_UNAVAILABLE
    assert f"toolset {toolset['name']!r} ({toolset['kind']})" in cause.message
    assert words in cause.message
    assert provider.requests == [] and hooks.seen == []  # no model call, no hook


async def test_a_call_pointed_at_a_hook_the_worker_lacks_never_leaves_it() -> None:
    """A call input is anyone's to write (a forged continue-as-new input): the kind looks
    its URL up again and refuses a hook its owner did not register."""
    with RecordingServer() as hooks:
        hook = webhooks(hooks.url)
        forged = hook.model_copy(update={"hook": "exfiltrate"})
        call = ToolCallInput(
            turn=1, slot=0, tool_name="ops_page_oncall", tool_call_id="c0",
            arguments='{"text": "x"}', target=forged,
        )  # fmt: skip
        worker = ActivityEnvironment()  # the tool's own limit: 60 s, as a workflow gives it
        worker.info = dataclasses.replace(worker.info, start_to_close_timeout=timedelta(seconds=65))
        result = await worker.run(ToolActivities(ToolRegistry()).run_tool, call)
        sent = call.model_copy(update={"target": hook})
        ran = await worker.run(ToolActivities(ToolRegistry()).run_tool, sent)
    assert result.is_error
    assert result.content == "Not allowed on this worker: no webhook ops/exfiltrate on this worker"
    assert ran.content == "HTTP 200"
    assert [s.path for s in hooks.seen] == ["/page"]  # only the registered hook was reached


async def test_a_toolset_of_a_kind_the_worker_lacks_is_not_admitted(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider([assistant_text("never")]) as provider:
        spec = spec_for(provider, [], toolsets=[{"kind": "fax", "name": "ops"}])
        cause = await failure_of(temporal_env, task_queue, spec)
    assert cause.type == NOT_ADMITTED
    assert "toolsets[ops]: no tool kind 'fax' on this worker (registered: agent, " in cause.message
    assert provider.requests == []


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


def test_every_target_survives_the_payload_converter_as_its_own_kind() -> None:
    converter = pydantic_data_converter.payload_converter
    targets: list[ToolTarget] = [
        FunctionTarget(),
        McpTarget(server="files", tool="read"),
        HttpOperation(api="orders", method="POST", url="http://h/o", body=True),
        SubAgentTarget(agent="researcher"),
        HandoffTarget(to="billing"),
        webhooks("http://127.0.0.1:9"),
    ]
    tools = [
        ResolvedTool(definition={"name": f"t{k}"}, policy={}, target=t)
        for k, t in enumerate(targets)
    ]  # type: ignore[arg-type]
    [back] = converter.from_payloads(converter.to_payloads([tools]), [list[ResolvedTool]])
    assert [t.target for t in back] == targets
    assert [type(t.target) for t in back] == [type(t) for t in targets]
    call = {"turn": 1, "slot": 0, "tool_name": "t", "tool_call_id": "c", "arguments": "{}"}
    with_call = ToolCallInput(**call, target=targets[-1])  # type: ignore[arg-type]
    [read] = converter.from_payloads(converter.to_payloads([with_call]), [ToolCallInput])
    assert read.target == targets[-1] and type(read.target) is type(targets[-1])


def test_an_unknown_kind_is_refused_naming_the_registered_ones() -> None:
    with pytest.raises(ValidationError) as refused:
        ResolvedTool.model_validate(
            {"definition": {"name": "t"}, "policy": {}, "target": {"kind": "fax"}}
        )
    text = str(refused.value)
    assert "unknown tool kind 'fax': registered kinds are " in text
    assert "agent, function, handoff, mcp, openapi" in text
    with pytest.raises(ValidationError, match="unknown tool kind 'fax'"):
        CallTarget.model_validate({"kind": "fax"})
    with pytest.raises(ValueError, match="tool kind 'mcp' is registered already"):
        register_tool_kind(_Impostor())  # another kind under a taken name
    with pytest.raises(ValueError, match="'inline': a registered kind runs on a worker"):
        register_tool_kind(_InWorkflow())  # the workflow would not know how to run it


class _Impostor(ToolKind[McpTarget, McpTarget]):
    name = "mcp"
    target = McpTarget


class _InWorkflow(ToolKind[McpTarget, McpTarget]):
    name = "inline"
    target = McpTarget
    runs_in = "session"
