"""What a request leaves out to fit the context budget is counted by the worker that
shapes it (``request_trimmed``): the Session does no work over the array to count it
when it makes a model call. A session opened in the first hash chain (whose replies
come without their digests) counts in the Session, for its life."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from durable_agent._session import CallModel, Session, SessionState
from durable_agent._spec._spec import AgentInput, AgentSpec
from durable_agent._wire._messages import AssistantMessage, UserMessage

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _long_session(workers_count: bool) -> Session:
    spec = AgentSpec.model_validate(
        {"model": {"name": "m", "context": {"budget_tokens": 200, "chars_per_token": 4}}}
    )
    history = []
    for k in range(50):
        history += [UserMessage(content=f"question {k} " * 5), AssistantMessage(content="ok " * 20)]
    session = Session(spec, SessionState(chain=2 if workers_count else None))
    session.start(AgentInput(spec=spec, history=history, message="and now?"), NOW)
    return session


@pytest.mark.parametrize("workers_count", [True, False])
def test_who_counts_what_a_request_leaves_out(workers_count: bool) -> None:
    session = _long_session(workers_count)
    command = session.next_command(suggested=False, now=NOW)
    assert isinstance(command, CallModel)
    if workers_count:
        assert session.trimmed == 0, "nothing counted over the array in the Session"
        session.request_trimmed(88)  # the worker's count, with the reply
        assert session.status().trimmed == 88
    else:
        assert session.trimmed > 80  # counted as the call was made, in the workflow
        assert session.status().trimmed == session.trimmed
