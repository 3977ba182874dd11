"""An evaluation whose case reaches a tool a person approves: the evaluation's
``approvals`` policy answers it (fail the case naming the call, deny it, approve it as
the evaluation's approver), and a judge given as an ``Agent``."""

from __future__ import annotations

import json

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import Agent, AgentClient, ModelSpec, Registry, tool
from durable_agent._contracts.evals import EvalCase
from durable_agent._wire.messages import AssistantMessage
from durable_agent.capabilities import ProviderEndpoint
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import RecordedRequest
from tests.support.agent_harness import running_worker, spec_for

wiped: list[str] = []


@tool(approval="always")
def wipe(name: str) -> str:
    """Clear a cache (a person approves)."""
    wiped.append(name)
    return f"cache {name} cleared"


JUDGE = "You judge."


def model(request: RecordedRequest) -> AssistantMessage:
    messages = request.body["messages"]
    if messages[0]["content"] == JUDGE:
        return assistant_text(json.dumps({"score": 1, "reason": "meets the rubric"}))
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        case = next(m["content"] for m in messages if m["role"] == "user")
        return assistant_calls(("wipe", {"name": case}))
    return assistant_text(f"result: {results[0]['content']}")


@pytest.mark.timeout(600)  # beside two benchmarks and the suite, one run took over 180 s
@pytest.mark.parametrize("policy", ["fail", "deny", "approve"])
async def test_a_case_that_waits_for_a_person_is_answered_by_the_policy(
    temporal_env: WorkflowEnvironment, task_queue: str, policy: str
) -> None:
    wiped.clear()
    case_name = f"tiles-{policy}"
    with ScriptedProvider(responder=model) as provider:
        async with running_worker(temporal_env, task_queue, Registry([wipe])):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            eval_id = await agents.evals.start(
                spec_for(provider, ["wipe"]),
                [EvalCase(id="c1", input=case_name, expected=f"result: cache {case_name} cleared")],
                approvals=policy,  # type: ignore[arg-type]
                approver="qa-bot",
            )
            report = await agents.evals.report(eval_id, wait=True)
            [case] = report.cases
            decided = await agents.session(case.session_id).messages() if case.session_id else []
    records = [m.approval for m in decided if getattr(m, "approval", None) is not None]
    if policy == "fail":
        assert case.status == "failed" and wiped == [], "the tool never ran"
        assert case.error is not None and "waited for a person (wipe" in case.error, case.error
        assert "approvals policy is 'fail'" in case.error
    elif policy == "deny":
        assert case.status == "scored" and wiped == []
        assert records and records[0].decision == "denied" and records[0].by == "qa-bot"
    else:
        assert case.status == "scored" and wiped == [case_name], "approved: ran once"
        assert records and records[0].decision == "approved" and records[0].by == "qa-bot"
        assert case.scores[0].score == 1.0


async def test_a_judge_given_as_an_agent_scores_a_case_with_criteria(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    with ScriptedProvider(responder=model) as provider:
        endpoint = ProviderEndpoint(base_url=provider.base_url, api_key_env=None)
        judge = Agent(
            name="judge", model=ModelSpec(name="judge-model", endpoint=endpoint), instructions=JUDGE
        )
        async with running_worker(temporal_env, task_queue, Registry([wipe])):
            agents = AgentClient(temporal_env.client, task_queue=task_queue)
            eval_id = await agents.evals.start(
                spec_for(provider, ["wipe"]),
                [EvalCase(id="c1", input="maps", criteria="clears the cache")],
                approvals="approve",
                judge=judge,
            )
            report = await agents.evals.report(eval_id, wait=True)
    [case] = report.cases
    judged = [s for s in case.scores if s.name == "judge"]
    assert judged and judged[0].score == 1.0 and judged[0].reason == "meets the rubric"

