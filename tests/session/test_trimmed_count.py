"""What a request leaves out to fit the context budget is counted by the worker that
shapes it, and comes back with the reply (``ModelReply.left_out``): the Session does no
work over the array to count it when it makes a model call. A session opened in the
first hash chain (whose replies come without their digests) counts in the Session, for
its life."""

from __future__ import annotations

import pytest

from durable_agent._session import CallModel, ModelReply, SessionState
from durable_agent._spec.document import AgentSpec
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, UserMessage
from durable_agent.testing import assistant_text
from tests.support.session_steps import Stepper


def _long_session(workers_count: bool) -> Stepper:
    spec = AgentSpec.model_validate(
        {"model": {"name": "m", "context": {"budget_tokens": 200, "chars_per_token": 4}}}
    )
    history = []
    for k in range(50):
        history += [UserMessage(content=f"question {k} " * 5), AssistantMessage(content="ok " * 20)]
    driver = Stepper(spec, Registry(), lambda body: assistant_text("the answer"))
    driver.open("and now?", SessionState(chain=2 if workers_count else None), history=history)
    return driver


@pytest.mark.parametrize("workers_count", [True, False])
def test_who_counts_what_a_request_leaves_out(workers_count: bool) -> None:
    driver = _long_session(workers_count)
    view = driver.session.view
    at_call: list[int] = []
    driver.on_command = lambda command: at_call.append(view.loop.trimmed)
    if workers_count:  # the worker's count, with the reply
        driver.outcomes = [ModelReply(assistant_text("the answer"), left_out=88)]
    assert isinstance(driver.step(), CallModel)
    if workers_count:
        assert at_call == [0], "nothing counted over the array in the Session"
        assert view.loop.trimmed == 88 and view.status().trimmed == 88
    else:
        assert at_call[0] > 80  # counted as the call was made, in the workflow
        assert view.status().trimmed == at_call[0]
    assert driver.session.messages[-1].content == "the answer"
