"""A tool whose owner names its approvers is gated: without ``approval=``, every call
waits for one of them (on the real server, the tool does not run while it waits), and
``approval="never"`` beside approvers is refused when the tool is made."""

from __future__ import annotations

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._spec.tools import ToolPolicy
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent.testing import ScriptedProvider, assistant_calls
from tests.support.agent_harness import running_worker, spec_for
from tests.trust.test_human_in_the_loop import pending_count


async def test_approvers_alone_gate_every_call(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    ran: list[str] = []
    registry = Registry()

    @tool(registry=registry, approvers=["alice"])
    def wire(to: str) -> str:
        """Wire money."""
        ran.append(to)
        return f"wired to {to}"

    with ScriptedProvider([assistant_calls(("wire", {"to": "bob"}))]) as provider:
        spec = spec_for(provider, ["wire"], session={})
        async with running_worker(temporal_env, task_queue, registry) as client:
            agents = AgentClient(client, task_queue=task_queue)
            session = await agents.start(spec, "wire bob", session_id=f"wire-{task_queue}")
            [pending] = await pending_count(agents, session, 1)
            ran_while_waiting = list(ran)
            await agents.session(session).end(by="ops")
            await agents.session(session).result()
    assert pending.tool_name == "wire" and pending.approvers == ["alice"]
    assert ran_while_waiting == [] and ran == [], "the call never ran undecided"
    assert wire.policy.approval == "always"


def test_approvers_beside_approval_never_are_refused_when_the_tool_is_made() -> None:
    with pytest.raises(TypeError, match="approval='never' asks no one"):

        @tool(approval="never", approvers=["alice"])
        def wire(to: str) -> str:
            """Wire money."""
            return to

    # a policy written as data (a registered source, a worker's file) reads the same way
    assert ToolPolicy.model_validate({"approvers": ["alice"]}).approval == "always"
    assert ToolPolicy.model_validate({}).approval == "never"
