"""A message someone sends may carry any id of its own, even one of the form the
session gives its own messages (``m<position>``), or the very id the session already
gave another message: it is accepted and answered, never refused for its form. Such an
id is kept in ``given_id`` and the message takes the session's id, so in the array no
two messages share an ``id``, and a reader that goes by the client's ids (the AG-UI
snapshot a chat client skips what it holds by) names every message once. On the real
server, at every entry point that takes an id: a start, the checked send, the update, a
bare signal and an inject. (The gateway's REST, conversation, OpenAI and MCP doors take
text alone, with no id; AG-UI's is shown with the official client in
``tests/gateway/test_agui_client.py``.)"""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient
from durable_agent._tools.registry import Registry
from durable_agent._wire.messages import AssistantMessage, SystemMessage, UserMessage, text_of
from durable_agent._wire.transcript import kept_apart, message_id, sender_id
from durable_agent.gateway._agui import messages_snapshot
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.support.agent_harness import running_worker, spec_for


async def test_any_id_a_client_gives_is_kept_and_answered_at_every_door(
    temporal_env: WorkflowEnvironment, task_queue: str
) -> None:
    replies = [assistant_text(word) for word in ("one", "two", "three", "four", "five")]
    with ScriptedProvider(replies) as provider:
        spec = spec_for(provider, session={})
        async with running_worker(temporal_env, task_queue, Registry()) as client:
            agents = AgentClient(client, task_queue=task_queue)
            # the first message is m0 in the array, its reply m1: the client's m1 is
            # the id the session gives that reply
            sid = await agents.start(spec, UserMessage(content="started", id="m1"))
            session = agents.session(sid)
            handle = client.get_workflow_handle(sid)
            await session.wait(after=0, timeout=60)
            # m0: the id the session gave the client's first message
            cursor = await session.send(UserMessage(content="sent", id="m0"))
            await session.wait(after=cursor, timeout=60)
            updated = await handle.execute_update(
                "send_message", UserMessage(content="updated", id="m5")
            )
            await session.wait(after=updated["before"], timeout=60)
            before = (await session.status()).message_count
            # m3: the reply to the second message, already given
            await handle.signal("send_message", UserMessage(content="signalled", id="m3"))
            await session.wait(after=before, timeout=60)
            await session.inject(SystemMessage(content="noted", id="m2"))
            cursor = await session.send(UserMessage(content="last", id="client-2"))
            await session.wait(after=cursor, timeout=60)
            status = await session.status()
            messages = await session.messages()
            await session.end(by="ops")

    assert status.rejected_signals == []
    # every message was answered: five model calls, the last one seeing all five
    assert len(provider.requests) == 5
    seen = [text_of(m["content"]) for m in provider.requests[-1].body["messages"]]
    for said in ("started", "sent", "updated", "signalled", "noted", "last"):
        assert said in seen, (said, seen)
    replies_kept = [m.content for m in messages if m.role == "assistant"]
    assert replies_kept == ["one", "two", "three", "four", "five"]

    # the session's ids: its own m<position> on every message but the one whose id
    # has another form, which keeps it as given
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids)), "no two messages share an id"
    for index, message in enumerate(messages):
        expected = "client-2" if text_of(message.content) == "last" else message_id(index)
        assert message.id == expected, (index, message)
    # the client's ids, each on its own message
    given = {text_of(m.content): sender_id(m) for m in messages if sender_id(m) is not None}
    assert given == {
        "started": "m1",
        "sent": "m0",
        "updated": "m5",
        "signalled": "m3",
        "noted": "m2",
        "last": "client-2",
    }
    by_given = {m.given_id: m for m in messages if m.given_id is not None}
    assert by_given["m1"].id != "m1" and by_given["m0"].id != "m0"
    assert [m.content for m in messages if m.id == "m1"] == ["one"]  # the reply, alone

    # a chat client's view (AG-UI's snapshot): the client's ids on its messages, the
    # session's own named apart, every id once
    snapshot = messages_snapshot("t", messages).messages
    names = [m.id for m in snapshot]
    assert len(names) == len(set(names)) == len(messages)
    shown = {m.id: m.content for m in snapshot}
    assert shown["m1"] == "started" and shown["m0"] == "sent" and shown["m3"] == "signalled"
    assert shown["m2"] == "noted" and shown["m5"] == "updated" and shown["client-2"] == "last"
    assert shown["t-m1"] == "one"


def test_a_client_id_of_the_snapshots_own_naming_still_names_one_message() -> None:
    """AG-UI names the session's own messages ``<thread>-m<index>``; a client that chose
    that very string for a message of its own keeps it, and the session's message is
    named apart."""
    array = [
        UserMessage(content="mine", id="t-m1"),
        AssistantMessage(content="the reply", id="m1"),
        UserMessage(content="again", given_id="m0", id="m2"),
    ]
    names = [(m.id, m.content) for m in messages_snapshot("t", array).messages]
    assert names == [("t-m1", "mine"), ("t-m1'", "the reply"), ("m0", "again")]


def test_a_given_id_is_the_sessions_to_set_never_the_senders() -> None:
    """A sender that writes ``given_id`` itself (to be taken for another client's
    message by a reader that goes by it) has it dropped; only the session moves an id
    there."""
    forged = UserMessage(content="hi", id="mine", given_id="someone-elses")
    assert kept_apart(forged).given_id is None and kept_apart(forged).id == "mine"
    moved = kept_apart(UserMessage(content="hi", id="m3", given_id="someone-elses"))
    assert (moved.id, moved.given_id) == (None, "m3")
