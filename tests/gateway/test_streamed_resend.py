"""A request sent again after a person decides elsewhere, streamed, gets the same answer
as sent unstreamed, at every door: Chat Completions and Responses driven by the
official ``openai`` SDK, AG-UI by its official client, over real HTTP against a real
worker, dev server and gateway process. Two orders, each made certain by a barrier in
the scripted provider rather than by waiting: the answer already written when the
request comes again, and the answer half-written (the model's stream held after its
first piece) when it comes again. Also: a chat sent again before the decision says
again what waits, and a streamed Responses approval answers as an unstreamed one."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._contracts.events import Idle, TextDelta
from durable_agent._tools.functions import tool
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage
from durable_agent.testing import ScriptedProvider, assistant_calls, assistant_text
from durable_agent.testing._scripted_provider import (
    RecordedRequest,
    Reply,
    chat_stream_events,
    sse_reply,
)
from tests.support.agui_client import run_agent
from tests.support.gateway_harness import served

registry = Registry()
cleared: list[str] = []
#: Longer than one streamed piece (16 characters): a held stream shows only its start.
ANSWER = "done: {result}, and every tile is drawn again from the source"


@tool(registry=registry, approval="always")
def clear_tiles(name: str) -> str:
    """Clear a tile cache (a person approves)."""
    cleared.append(name)
    return f"cache {name} cleared"


def responder(hold: threading.Event | None = None) -> Any:
    """Asked to clear, it calls ``clear_tiles``; given the tool's result, it answers
    ``ANSWER`` (its stream held after the first piece until ``hold`` is set)."""

    def answer(request: RecordedRequest) -> AssistantMessage | Reply:
        last = request.body["messages"][-1]
        if last["role"] == "tool":
            message = assistant_text(ANSWER.format(result=last["content"]))
            if hold is None:
                return message
            assert request.streamed, "the worker asks for a stream: deltas are on"
            held = sse_reply(chat_stream_events(message))
            return dataclasses.replace(held, hold=hold, hold_after=2)  # its role, one piece
        if "clear" in last["content"]:
            return assistant_calls(("clear_tiles", {"name": "tiles"}))
        return assistant_text(f"you said {last['content']}")

    return answer


class Door:
    """One door's request, sent and sent again, by the ``openai`` SDK: Chat Completions
    sends the same messages again; Responses sends the same ``mcp_approval_response``
    again, for a call a person decided elsewhere."""

    def __init__(self, kind: str, sdk: openai.AsyncOpenAI, task_queue: str) -> None:
        self.kind, self.sdk = kind, sdk
        self.asked = [{"role": "user", "content": f"clear the tiles {task_queue}"}]
        self.conversation = f"tiles-{task_queue}"
        self.again_input: list[dict[str, Any]] = []
        self.previous = ""

    async def ask(self) -> tuple[str, str, str]:
        """Streamed: what the reader is shown, the session, and the call's approve URL."""
        stream = await self._create(True, first=True)
        if self.kind == "chat":
            chunks = [chunk async for chunk in stream]
            extension = chunks[-1].model_extra["durable_agent"]
            [pending] = extension["pending_approvals"]
            return text_of(chunks), extension["session_id"], pending["approve"]
        response = [event async for event in stream][-1].response
        [call] = [item for item in response.output if item.type == "mcp_approval_request"]
        self.previous = response.id
        self.again_input = [
            {"type": "mcp_approval_response", "approval_request_id": call.id, "approve": True}
        ]
        session = response.model_extra["durable_agent"]["session_id"]
        return response.output_text, session, f"/api/sessions/{session}/approvals/{call.id}/approve"

    async def opened(self) -> Any:
        """Sent again, streamed: its response begun (the gateway has read where the log is)."""
        return await self._create(True)

    async def read(self, stream: Any) -> str:
        """A stream's text: its deltas, put together."""
        if self.kind == "chat":
            return text_of([chunk async for chunk in stream])
        events = [event async for event in stream]
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert events[-1].type == "response.completed", events[-1]
        assert deltas == events[-1].response.output_text, events
        return deltas

    async def again(self) -> str:
        """Sent again, unstreamed: the answer's text."""
        answer = await self._create(False)
        if self.kind == "chat":
            return str(answer.choices[0].message.content)
        return str(answer.output_text)

    async def _create(self, stream: bool, first: bool = False) -> Any:
        if self.kind == "chat":
            chat: Any = self.sdk.chat.completions
            return await chat.create(model="durable-agent", messages=self.asked, stream=stream)
        if first:
            return await self.sdk.responses.create(
                model="durable-agent",
                input="clear the tiles",
                conversation=self.conversation,
                stream=True,
            )
        responses: Any = self.sdk.responses
        return await responses.create(
            model="durable-agent",
            previous_response_id=self.previous,
            input=self.again_input,
            stream=stream,
        )


def text_of(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


DOORS = pytest.mark.parametrize("kind", ["chat", "responses"])


@DOORS
async def test_a_streamed_resend_gets_the_answer_already_written(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path, kind: str
) -> None:
    """Streamed: the call waits; a person approves it elsewhere; sent again unstreamed
    (the answer, waited for), then streamed (the answer written already): the same
    text, the tool run once, and the model not asked again."""
    cleared.clear()
    with ScriptedProvider(responder=responder()) as provider:
        async with served(
            temporal_env, task_queue, provider, ["clear_tiles"], registry, tmp_path
        ) as (_, base):
            door = Door(kind, openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="-"), task_queue)
            _, _, approve = await door.ask()
            before_deciding = list(cleared)
            async with httpx.AsyncClient(base_url=base) as http:
                decided = await http.post(approve, json={"by": "alice"})
            unstreamed = await door.again()
            asked_before = len(provider.requests)
            resent = await door.read(await door.opened())
            asked_after = len(provider.requests)
    answer = ANSWER.format(result="cache tiles cleared")
    assert before_deciding == [] and decided.status_code == 202 and cleared == ["tiles"]
    assert unstreamed == answer
    assert resent == answer  # the issue: this was "" (an empty delta and a stop)
    assert asked_after == asked_before == 2  # the call, then the answer: nothing asked twice


@DOORS
async def test_a_streamed_resend_gets_an_answer_still_being_written(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path, kind: str
) -> None:
    """Approved elsewhere; the answer's first piece is in the session's log and the
    model's stream is held; the request comes again streamed, then the model's stream
    goes on: the resend's text is the whole answer (not its tail), as the unstreamed
    resend's is."""
    cleared.clear()
    hold = threading.Event()
    with ScriptedProvider(responder=responder(hold)) as provider:
        async with served(
            temporal_env, task_queue, provider, ["clear_tiles"], registry, tmp_path
        ) as (client, base):
            door = Door(kind, openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="-"), task_queue)
            _, session_id, approve = await door.ask()
            session = AgentClient(client, task_queue=task_queue).session(session_id)
            decided_at = await session.latest_offset()
            async with httpx.AsyncClient(base_url=base) as http:
                decided = await http.post(approve, json={"by": "alice"})
            written: list[str] = []
            async for event in session.follow(after=decided_at):  # the answer has begun
                if isinstance(event, TextDelta):
                    written.append(event.text)
                    break
            stream = await door.opened()
            hold.set()
            resent = await door.read(stream)
            unstreamed = await door.again()
            asked_in_all = len(provider.requests)
    answer = ANSWER.format(result="cache tiles cleared")
    assert decided.status_code == 202 and cleared == ["tiles"]
    assert written and answer.startswith(written[0]) and written[0] != answer
    assert unstreamed == answer
    assert resent == answer
    assert asked_in_all == 2


async def test_a_chat_sent_again_before_the_decision_says_again_what_waits(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Sent again while the call still waits: the same waiting text at once, streamed
    and not (not a request left open until someone decides)."""
    cleared.clear()
    with ScriptedProvider(responder=responder()) as provider:
        async with served(
            temporal_env, task_queue, provider, ["clear_tiles"], registry, tmp_path
        ) as (_, base):
            door = Door("chat", openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="-"), task_queue)
            shown, _, _ = await door.ask()
            streamed = await door.read(await door.opened())
            unstreamed = await door.again()
    assert shown.startswith("Waiting for a person to approve 1 call(s)"), shown
    assert streamed == shown == unstreamed
    assert cleared == [] and len(provider.requests) == 1


async def test_a_streamed_response_goes_through_an_approval_as_an_unstreamed_one(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    """Responses, streamed: the call that waits is an ``mcp_approval_request`` item; the
    streamed ``mcp_approval_response`` gets the answer, the same as the response read
    back unstreamed (``GET``) and as the same conversation run unstreamed."""
    cleared.clear()
    with ScriptedProvider(responder=responder()) as provider:
        async with served(
            temporal_env, task_queue, provider, ["clear_tiles"], registry, tmp_path
        ) as (_, base):
            sdk = openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="not-needed")

            async def through(conversation: str, stream: bool) -> tuple[str, str]:
                """The conversation's answer after the approval, and that response's id."""
                asking: Any = await sdk.responses.create(
                    model="durable-agent",
                    input="clear the tiles",
                    conversation=conversation,
                    stream=stream,
                )
                if stream:
                    events = [e async for e in asking]
                    asking = events[-1].response
                [request] = [i for i in asking.output if i.type == "mcp_approval_request"]
                answered: Any = await sdk.responses.create(
                    model="durable-agent",
                    previous_response_id=asking.id,
                    input=[
                        {
                            "type": "mcp_approval_response",
                            "approval_request_id": request.id,
                            "approve": True,
                        }
                    ],
                    stream=stream,
                )
                if not stream:
                    return answered.output_text, answered.id
                events = [e async for e in answered]
                deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
                assert deltas == events[-1].response.output_text, events
                return deltas, events[-1].response.id

            streamed, streamed_id = await through(f"streamed-{task_queue}", True)
            unstreamed, _ = await through(f"unstreamed-{task_queue}", False)
            read_back = await sdk.responses.retrieve(streamed_id)
    answer = ANSWER.format(result="cache tiles cleared")
    assert streamed == unstreamed == read_back.output_text == answer
    assert cleared == ["tiles", "tiles"] and len(provider.requests) == 4


@pytest.mark.parametrize("answer_written", [True, False])
async def test_an_agui_client_back_after_a_decision_gets_the_whole_answer(
    temporal_env: WorkflowEnvironment, task_queue: str, tmp_path: Path, answer_written: bool
) -> None:
    """AG-UI's way of sending again, by the official client: the run ends with the
    interrupt, a person approves elsewhere, the client comes back with what it had.
    Its messages end with the whole answer, whether the answer was written already or
    still being written (the model's stream held until the run's first snapshot), and
    it is never shown a reply that starts mid-sentence."""
    cleared.clear()
    hold = threading.Event()
    with ScriptedProvider(responder=responder(None if answer_written else hold)) as provider:
        async with served(
            temporal_env, task_queue, provider, ["clear_tiles"], registry, tmp_path
        ) as (client, base):
            url, thread = f"{base}/api/agui", f"thread-{task_queue}"
            asked = [{"id": "u1", "role": "user", "content": "clear the tiles"}]
            first = await run_agent(url, thread, asked)
            [interrupt] = first["events"][-1]["outcome"]["interrupts"]
            session = AgentClient(client, task_queue=task_queue).session(f"conversation-{thread}")
            decided_at = await session.latest_offset()
            async with httpx.AsyncClient(base_url=base) as http:
                approve = f"/api/sessions/{session.id}/approvals/{interrupt['id']}/approve"
                decided = await http.post(approve, json={"by": "alice"})
            awaited = Idle if answer_written else TextDelta
            async for event in session.follow(after=decided_at):
                if isinstance(event, awaited):
                    break

            def on_event(event: dict[str, Any]) -> None:
                if event["type"] == "MESSAGES_SNAPSHOT":  # it follows the session now
                    hold.set()

            back = await run_agent(url, thread, first["messages"], on_event)
    answer = ANSWER.format(result="cache tiles cleared")
    assert decided.status_code == 202 and cleared == ["tiles"] and back["error"] is None
    assert back["messages"][-1] == {
        "id": back["messages"][-1]["id"],
        "role": "assistant",
        "content": answer,
    }
    shown = [e["delta"] for e in back["events"] if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert shown == []  # the answer comes in the snapshot, never from mid-sentence
    assert kinds(back)[-1] == "RUN_FINISHED" and len(provider.requests) == 2


def kinds(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"]]
